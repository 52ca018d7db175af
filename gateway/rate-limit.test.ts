import { describe, expect, it } from "vitest";
import { createRateLimiter, rateLimitHeaders } from "./rate-limit.js";

const plan = { rps: 50, burst: 100 };

describe("per-tenant token bucket", () => {
  it("starts full: a new tenant gets its whole burst, then 429 with r=0 and Retry-After of at least 1", () => {
    const limiter = createRateLimiter();
    for (let i = 0; i < 100; i++) expect(limiter.take("t", plan, 0).allowed).toBe(true);
    const refused = limiter.take("t", plan, 0);
    expect(refused.allowed).toBe(false);
    const headers = rateLimitHeaders(refused);
    expect(headers.ratelimit).toMatch(/^"tenant";r=0;t=\d+$/);
    expect(headers["retry-after"]).toBe("1");
    expect(headers["ratelimit-policy"]).toBe('"tenant";q=50;w=1');
  });

  it("refills at the plan's rate", () => {
    const limiter = createRateLimiter();
    const slow = { rps: 2, burst: 2 };
    limiter.take("t", slow, 0);
    limiter.take("t", slow, 0);
    expect(limiter.take("t", slow, 0).allowed).toBe(false);
    expect(limiter.take("t", slow, 499).allowed).toBe(false);
    expect(limiter.take("t", slow, 500).allowed).toBe(true);
  });

  it("gives a Retry-After of the whole seconds until the next token", () => {
    const limiter = createRateLimiter();
    const verySlow = { rps: 0.25, burst: 1 };
    limiter.take("t", verySlow, 0);
    expect(limiter.take("t", verySlow, 0).retryAfterSeconds).toBe(4);
  });

  it("keeps tenants apart", () => {
    const limiter = createRateLimiter();
    const tiny = { rps: 1, burst: 1 };
    expect(limiter.take("a", tiny, 0).allowed).toBe(true);
    expect(limiter.take("a", tiny, 0).allowed).toBe(false);
    expect(limiter.take("b", tiny, 0).allowed).toBe(true);
  });

  it("enforces the budget divided by the gateway replicas", () => {
    const limiter = createRateLimiter({ replicas: 4 });
    let allowed = 0;
    for (let i = 0; i < 100; i++) if (limiter.take("t", plan, 0).allowed) allowed++;
    expect(allowed).toBe(25);
  });

  it("reports the remaining whole tokens", () => {
    const limiter = createRateLimiter();
    expect(limiter.take("t", plan, 0).remaining).toBe(99);
    expect(rateLimitHeaders(limiter.take("t", plan, 0)).ratelimit).toBe('"tenant";r=98;t=1');
  });
});
