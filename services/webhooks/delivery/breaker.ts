// The delivery worker's circuit breaker: subscriptions whose receiver could not be reached. Their
// deliveries are not claimed, so no attempt is spent on a receiver that is down and no wait is
// shortened; a probe (a connection, no request) every PROBE_INTERVAL_MS finds it back, and its
// backlog goes at once. Per replica and in memory: a restarted replica learns it again from one
// failed attempt. Held no longer than the hold's bound, and only once while the receiver stays
// unreachable (`unheld`): its deliveries then follow the schedule, each failing attempt counted, so
// a receiver gone for good ends its deliveries failed when the schedule says, not a hold later.

/** Plain state: the worker owns one, these functions change it. */
export type Breaker = {
  /** How long a subscription is held at most (UNREACHABLE_HOLD_MS). */
  holdMaxMs: number;
  /** The held subscriptions: their receiver's URL, since when, and whether a probe is out. */
  held: Map<string, { url: string; since: number; probing: boolean }>;
  /** Subscriptions whose hold ran out while their receiver stayed unreachable: never held again until it answers. */
  unheld: Set<string>;
};

export function newBreaker(holdMaxMs: number): Breaker {
  return { holdMaxMs, held: new Map(), unheld: new Set() };
}

/**
 * What an attempt at a subscription's receiver tells the breaker. True when it opens the breaker
 * (the receiver could not be reached, and the subscription was neither held nor released from a hold).
 */
export function noteAttempt(
  b: Breaker,
  subscriptionId: string,
  url: string,
  unreachable: boolean,
  now: number,
): boolean {
  if (!unreachable) {
    b.unheld.delete(subscriptionId);
    return false;
  }
  if (b.held.has(subscriptionId) || b.unheld.has(subscriptionId)) return false;
  b.held.set(subscriptionId, { url, since: now, probing: false });
  return true;
}

/** Why a held subscription's deliveries go again. */
export type Resumed = "reachable" | "hold-over";

/**
 * One probe pass: a subscription held past the bound is released to the schedule; every other one
 * whose receiver has no probe out gets one, and is released when it answers. `resumed` is told of
 * each release (the worker claims again).
 */
export function probeHeld(
  b: Breaker,
  now: number,
  probe: (url: string) => Promise<boolean>,
  resumed: (subscriptionId: string, why: Resumed) => void,
): void {
  for (const [subscriptionId, entry] of b.held) {
    if (now - entry.since > b.holdMaxMs) {
      b.held.delete(subscriptionId);
      b.unheld.add(subscriptionId);
      resumed(subscriptionId, "hold-over");
      continue;
    }
    if (entry.probing) continue;
    entry.probing = true;
    void probe(entry.url).then((up) => {
      entry.probing = false;
      if (!up) return;
      b.held.delete(subscriptionId);
      resumed(subscriptionId, "reachable");
    });
  }
}
