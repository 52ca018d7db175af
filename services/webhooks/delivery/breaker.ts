// Holds an unreachable receiver's deliveries so no attempt is spent on it; a probe finds it back. In memory per
// replica (one failed attempt teaches a restarted one). Held once only, so a receiver gone for good fails on schedule.

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

/** True when the attempt opens the breaker: unreachable, and neither held nor released from a hold already. */
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

/** Releases holds past the bound and probes the rest, one probe out each; `resumed` hears of every release. */
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
