// The worker's slots and claim sizing. Plain state: the worker owns one, these functions change it.

export type Slots = {
  /** Attempts of this process in flight at most. */
  max: number;
  /** Attempts for one subscription in flight at most. */
  perSubscription: number;
  /** The attempts in flight, by delivery (the drain waits for them). */
  running: Map<string, Promise<void>>;
  /** How many attempts each subscription has in flight. */
  bySubscription: Map<string, number>;
  /**
   * The last claim was held back by slots or caps, so more may be due: every ending attempt wakes a claim. Otherwise
   * only claimed ones do; a claim per finished leased attempt would waste a statement.
   */
  heldBack: boolean;
};

export function newSlots(max: number, perSubscription: number): Slots {
  return { max, perSubscription, running: new Map(), bySubscription: new Map(), heldBack: true };
}

/** What a claim may take: `limit` deliveries at most, each subscription's attempts in flight in `busy`. */
export type ClaimPlan = { limit: number; busy: Map<string, number> };

/** The next claim's size and caps, or undefined when every slot is busy; a held subscription (breaker.ts) is full. */
export function planClaim(s: Slots, held: Iterable<string>): ClaimPlan | undefined {
  const limit = s.max - s.running.size;
  if (limit <= 0) {
    s.heldBack = true;
    return undefined;
  }
  return { limit, busy: claimCaps(s, held) };
}

/** In-flight attempts per subscription for a claim's cap; a held subscription's counts as full. */
export function claimCaps(s: Slots, held: Iterable<string>): Map<string, number> {
  const caps = new Map(s.bySubscription);
  for (const subscriptionId of held) caps.set(subscriptionId, s.perSubscription);
  return caps;
}

/** After a claim took `claimed` deliveries for `plan`: true when it filled every free slot (claim again at once). */
export function noteClaim(s: Slots, plan: ClaimPlan, claimed: number): boolean {
  s.heldBack = claimed === plan.limit || [...plan.busy.values()].some((n) => n >= s.perSubscription);
  return claimed === plan.limit;
}

export function occupy(s: Slots, deliveryId: string, subscriptionId: string, running: Promise<void>): void {
  s.running.set(deliveryId, running);
  s.bySubscription.set(subscriptionId, (s.bySubscription.get(subscriptionId) ?? 0) + 1);
}

/** True when the freed slot should wake a claim: always for a claimed attempt, for a leased one only if held back. */
export function vacate(s: Slots, deliveryId: string, subscriptionId: string, first: boolean): boolean {
  s.running.delete(deliveryId);
  const n = (s.bySubscription.get(subscriptionId) ?? 1) - 1;
  if (n > 0) s.bySubscription.set(subscriptionId, n);
  else s.bySubscription.delete(subscriptionId);
  return !first || s.heldBack;
}
