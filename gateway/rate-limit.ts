/**
 * The per-tenant token bucket of decisions.md §2: refill `rps` tokens a second up to `burst`; a new
 * tenant starts full; every authenticated /v1/api request takes a token. With several gateway
 * replicas each one enforces the budget divided by the replica count (as Envoy's local rate limit
 * does), so the buckets live in this process and cost no round trip.
 */
export type RateLimitPlan = { rps: number; burst: number };

export type RateLimitDecision = {
  allowed: boolean;
  /** Whole tokens left after this request. */
  remaining: number;
  /** Whole seconds until the bucket is full again. */
  resetSeconds: number;
  /** Whole seconds until the next token, at least 1 (the Retry-After of a refusal). */
  retryAfterSeconds: number;
  /** The tenant's policy as the RateLimit-Policy header states it. */
  policy: RateLimitPlan;
};

export type RateLimiter = { take(tenantId: string, plan: RateLimitPlan, nowMs: number): RateLimitDecision };

export function createRateLimiter({ replicas = 1, maxTenants = 100_000 } = {}): RateLimiter {
  const buckets = new Map<string, { tokens: number; updatedMs: number }>();
  return {
    take(tenantId, plan, nowMs) {
      const rate = plan.rps / replicas;
      const capacity = Math.max(1, plan.burst / replicas);
      let bucket = buckets.get(tenantId);
      if (!bucket) {
        if (buckets.size >= maxTenants) buckets.delete(buckets.keys().next().value as string);
        bucket = { tokens: capacity, updatedMs: nowMs };
        buckets.set(tenantId, bucket);
      }
      const elapsedMs = Math.max(0, nowMs - bucket.updatedMs);
      bucket.tokens = Math.min(capacity, bucket.tokens + (elapsedMs / 1000) * rate);
      bucket.updatedMs = nowMs;
      const allowed = bucket.tokens >= 1;
      if (allowed) bucket.tokens -= 1;
      return {
        allowed,
        remaining: Math.floor(bucket.tokens),
        resetSeconds: Math.ceil((capacity - bucket.tokens) / rate),
        retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / rate)),
        policy: plan,
      };
    },
  };
}

/** The IETF RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers). */
export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  const headers: Record<string, string> = {
    "ratelimit-policy": `"tenant";q=${decision.policy.rps};w=1`,
    ratelimit: `"tenant";r=${decision.allowed ? decision.remaining : 0};t=${decision.resetSeconds}`,
  };
  if (!decision.allowed) headers["retry-after"] = String(decision.retryAfterSeconds);
  return headers;
}
