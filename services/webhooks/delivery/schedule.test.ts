import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../lib/config.js";
import { type AttemptOutcome, firstAttemptAt, nextStep } from "./schedule.js";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const standardScheduleMs = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];
const failedAt = new Date("2026-11-25T12:00:00.000Z");

const http500: AttemptOutcome = { statusCode: 500, error: "HTTP 500", retryAfterMs: null };

function waitAfter(attempt: number, outcome: AttemptOutcome, random = () => 0): number | null {
  const step = nextStep({ outcome, automaticAttempts: attempt, failedAt, retryScheduleMs: standardScheduleMs, random });
  return step.nextAttemptAt === null ? null : step.nextAttemptAt.getTime() - failedAt.getTime();
}

describe("nextStep", () => {
  it("is the operations.md default schedule when WEBHOOK_RETRY_SCHEDULE is unset, and reads the units", () => {
    expect(loadConfig({}).webhooks.retryScheduleMs).toEqual(standardScheduleMs);
    expect(loadConfig({ WEBHOOK_RETRY_SCHEDULE: "0,250ms,2s,1m,1h" }).webhooks.retryScheduleMs).toEqual([
      0,
      250,
      2 * SECOND,
      MINUTE,
      HOUR,
    ]);
  });

  it("waits 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h after each failure, then fails after the tenth attempt", () => {
    const waits = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((attempt) => waitAfter(attempt, http500));
    expect(waits).toEqual(standardScheduleMs.slice(1));
    expect(
      nextStep({ outcome: http500, automaticAttempts: 10, failedAt, retryScheduleMs: standardScheduleMs }),
    ).toEqual({
      status: "failed",
      nextAttemptAt: null,
    });
  });

  it("lengthens each wait by 0 to 20 %, never shortens it", () => {
    expect(waitAfter(2, http500, () => 0)).toBe(5 * MINUTE);
    expect(waitAfter(2, http500, () => 0.5)).toBe(5 * MINUTE * 1.1);
    expect(waitAfter(2, http500, () => 0.999_999)).toBeLessThanOrEqual(5 * MINUTE * 1.2);
    for (let i = 0; i < 200; i++) {
      const wait = waitAfter(3, http500, Math.random) ?? 0;
      expect(wait).toBeGreaterThanOrEqual(30 * MINUTE);
      expect(wait).toBeLessThanOrEqual(36 * MINUTE);
    }
  });

  it("succeeds on an attempt without error and fails at once on a 410, with no next attempt", () => {
    const ok = { statusCode: 204, error: null, retryAfterMs: null };
    expect(nextStep({ outcome: ok, automaticAttempts: 1, failedAt, retryScheduleMs: standardScheduleMs })).toEqual({
      status: "succeeded",
      nextAttemptAt: null,
    });
    const gone = { statusCode: 410, error: "HTTP 410", retryAfterMs: null };
    expect(nextStep({ outcome: gone, automaticAttempts: 1, failedAt, retryScheduleMs: standardScheduleMs })).toEqual({
      status: "failed",
      nextAttemptAt: null,
    });
  });

  it("honours a longer Retry-After on 429 and 503, capped at twice the scheduled wait", () => {
    const after = (statusCode: number, retryAfterMs: number) => ({
      statusCode,
      error: `HTTP ${statusCode}`,
      retryAfterMs,
    });
    // After attempt 2 the schedule waits 5 min.
    expect(waitAfter(2, after(429, 7 * MINUTE))).toBe(7 * MINUTE);
    expect(waitAfter(2, after(503, 7 * MINUTE))).toBe(7 * MINUTE);
    expect(waitAfter(2, after(429, 3 * HOUR))).toBe(10 * MINUTE);
    // Shorter than the schedule: the schedule wins.
    expect(waitAfter(2, after(429, 10 * SECOND))).toBe(5 * MINUTE);
    expect(waitAfter(2, after(429, 0), () => 0.5)).toBe(5.5 * MINUTE);
    // Only 429 and 503 carry a Retry-After that counts.
    expect(waitAfter(2, after(500, 7 * MINUTE))).toBe(5 * MINUTE);
    expect(waitAfter(2, after(301, 7 * MINUTE))).toBe(5 * MINUTE);
  });

  it("retries failures without an HTTP answer (timeout, blocked address) on the same schedule", () => {
    expect(waitAfter(1, { statusCode: null, error: "timeout", retryAfterMs: null })).toBe(5 * SECOND);
  });

  it("follows a shortened test schedule", () => {
    const retryScheduleMs = [0, 100, 200];
    const step = (automaticAttempts: number) =>
      nextStep({ outcome: http500, automaticAttempts, failedAt, retryScheduleMs, random: () => 0 });
    expect(step(1).nextAttemptAt?.getTime()).toBe(failedAt.getTime() + 100);
    expect(step(2).nextAttemptAt?.getTime()).toBe(failedAt.getTime() + 200);
    expect(step(3)).toEqual({ status: "failed", nextAttemptAt: null });
  });
});

describe("firstAttemptAt", () => {
  it("is the event time plus the schedule's first wait (at once by default)", () => {
    expect(firstAttemptAt(failedAt, standardScheduleMs)).toEqual(failedAt);
    expect(firstAttemptAt(failedAt, [1000, 2000], () => 0.5)).toEqual(new Date(failedAt.getTime() + 1100));
  });
});
