// The delivery worker's slots and the sizing of its claim round: how many attempts run, for which
// subscriptions, how many deliveries the next claim may take and with which caps, and whether the
// last claim was held back by them. Plain state: the worker owns one, these functions change it.

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
   * Whether the last claim was held back by the slots or caps, so that more may be due than it
   * took: then every attempt that ends wakes the worker for another claim. Otherwise only a claimed
   * attempt does (its subscription may have more due); a fan-out's leased attempt then frees a slot
   * nothing waits for, and a claim per finished first attempt would be a statement wasted.
   */
  heldBack: boolean;
};

export function newSlots(max: number, perSubscription: number): Slots {
  return { max, perSubscription, running: new Map(), bySubscription: new Map(), heldBack: true };
}

/** What a claim may take: `limit` deliveries at most, each subscription's attempts in flight in `busy`. */
export type ClaimPlan = { limit: number; busy: Map<string, number> };

/**
 * The next claim's size and caps, or undefined when every slot is busy (held back: a finishing
 * attempt wakes the worker). A held subscription (breaker.ts) counts as full.
 */
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

/** An attempt takes a slot. */
export function occupy(s: Slots, deliveryId: string, subscriptionId: string, running: Promise<void>): void {
  s.running.set(deliveryId, running);
  s.bySubscription.set(subscriptionId, (s.bySubscription.get(subscriptionId) ?? 0) + 1);
}

/**
 * An attempt frees its slot. True when that should wake a claim: a claimed attempt always, a
 * fan-out's leased (`first`) one only while claims are held back.
 */
export function vacate(s: Slots, deliveryId: string, subscriptionId: string, first: boolean): boolean {
  s.running.delete(deliveryId);
  const n = (s.bySubscription.get(subscriptionId) ?? 1) - 1;
  if (n > 0) s.bySubscription.set(subscriptionId, n);
  else s.bySubscription.delete(subscriptionId);
  return !first || s.heldBack;
}
