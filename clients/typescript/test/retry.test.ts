import { describe, expect, it } from "vitest";
import {
  backoffDelayMs,
  DEFAULT_RETRY,
  isSafeToRetry,
  parseRateLimitReset,
  parseRetryAfter,
  requestedDelayMs,
  retryOptions,
} from "../src/retry.js";

// The retry rules alone (src/retry.ts); test/transport.test.ts runs them over real HTTP.

const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers });
const NOW = Date.parse("2026-11-28T12:00:00Z");

describe("which requests may be sent again", () => {
  const keyed = new Headers({ "Idempotency-Key": "k" });

  it("idempotent methods, and marker creates carrying an Idempotency-Key", () => {
    for (const method of ["GET", "get", "HEAD", "PUT", "DELETE", "OPTIONS"])
      expect(isSafeToRetry(method, "/v1/api/servers", new Headers())).toBe(true);
    expect(isSafeToRetry("POST", "/v1/api/timeline-events", keyed)).toBe(true);
  });

  it("never another write, even with a key the server ignores there", () => {
    expect(isSafeToRetry("POST", "/v1/api/timeline-events", new Headers())).toBe(false);
    for (const method of ["POST", "PATCH"]) expect(isSafeToRetry(method, "/v1/api/servers", keyed)).toBe(false);
    expect(isSafeToRetry("POST", "/v1/webhooks/deliveries/d/replay", keyed)).toBe(false);
  });
});

describe("the retry options", () => {
  it("fill each field left out or undefined with its default; false is one attempt", () => {
    expect(retryOptions(undefined)).toEqual(DEFAULT_RETRY);
    expect(retryOptions({ maxAttempts: undefined, maxDelayMs: 5 })).toEqual({ ...DEFAULT_RETRY, maxDelayMs: 5 });
    expect(retryOptions(false).maxAttempts).toBe(1);
  });

  it("refuse what would never stop or overflow a timer", () => {
    for (const maxAttempts of [0, 1.5, Number.POSITIVE_INFINITY, Number.NaN, 101])
      expect(() => retryOptions({ maxAttempts })).toThrow(RangeError);
    for (const ms of [-1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
      expect(() => retryOptions({ maxDelayMs: ms })).toThrow(RangeError);
      expect(() => retryOptions({ baseDelayMs: ms })).toThrow(RangeError);
    }
  });
});

describe("the wait an answer asks for", () => {
  it("a 503 with Retry-After in seconds or as a date", () => {
    expect(requestedDelayMs(answer(503, { "retry-after": "2" }), NOW)).toBe(2000);
    expect(requestedDelayMs(answer(503, { "retry-after": "Sat, 28 Nov 2026 12:00:05 GMT" }), NOW)).toBe(5000);
    expect(parseRetryAfter("Sat, 28 Nov 2026 11:59:00 GMT", NOW)).toBe(0);
  });

  it("a 429 with Retry-After, or else its RateLimit reset", () => {
    expect(requestedDelayMs(answer(429, { "retry-after": "1", ratelimit: '"tenant";r=0;t=3' }), NOW)).toBe(1000);
    expect(requestedDelayMs(answer(429, { ratelimit: '"tenant";r=0;t=3' }), NOW)).toBe(3000);
    expect(parseRateLimitReset('"tenant";r=12;t=0')).toBe(0);
  });

  it("none for a 503 without Retry-After, a 429 without either header, a malformed one, or any other status", () => {
    expect(requestedDelayMs(answer(503), NOW)).toBeUndefined();
    expect(requestedDelayMs(answer(429), NOW)).toBeUndefined();
    expect(requestedDelayMs(answer(503, { "retry-after": "soon" }), NOW)).toBeUndefined();
    expect(requestedDelayMs(answer(503, { "retry-after": "-1" }), NOW)).toBeUndefined();
    for (const status of [200, 400, 401, 404, 409, 500, 502, 504])
      expect(requestedDelayMs(answer(status, { "retry-after": "1" }), NOW)).toBeUndefined();
  });
});

describe("the backoff", () => {
  it("doubles from the base step, and is never shorter than the server's wait", () => {
    expect([1, 2, 3].map((n) => backoffDelayMs(n, undefined, DEFAULT_RETRY, 0))).toEqual([500, 1000, 2000]);
    expect(backoffDelayMs(1, 1000, DEFAULT_RETRY, 0)).toBe(1000);
    expect(backoffDelayMs(3, 1000, DEFAULT_RETRY, 0)).toBe(2000);
  });

  it("lengthens each wait by up to 20%, never shortens it", () => {
    expect(backoffDelayMs(1, 1000, DEFAULT_RETRY, 0.999)).toBe(1200);
    expect(backoffDelayMs(2, undefined, DEFAULT_RETRY, 0.5)).toBe(1100);
  });

  it("never waits over maxDelayMs, however many attempts", () => {
    expect(backoffDelayMs(12, undefined, DEFAULT_RETRY, 0.9)).toBe(30_000);
    expect(backoffDelayMs(1, 30_000, DEFAULT_RETRY, 0.9)).toBe(30_000);
  });
});
