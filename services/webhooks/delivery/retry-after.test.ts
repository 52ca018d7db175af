import { describe, expect, it } from "vitest";
import { parseRetryAfterMs } from "./retry-after.js";

const nowMs = Date.parse("2026-11-25T12:00:00.000Z");

describe("parseRetryAfterMs", () => {
  it.each([
    ["120", 120_000],
    ["0", 0],
    [" 7 ", 7000],
    ["Wed, 25 Nov 2026 12:02:00 GMT", 120_000],
    ["Wed, 25 Nov 2026 11:00:00 GMT", 0],
  ])("reads %j as %d ms", (value, ms) => {
    expect(parseRetryAfterMs(value, nowMs)).toBe(ms);
  });

  it.each([undefined, "", "soon", "-5", "1.5", "2026-11-25T12:05:00Z", "Wed, 99 Nov 2026 25:00:00 GMT"])(
    "ignores %j",
    (value) => {
      expect(parseRetryAfterMs(value, nowMs)).toBeUndefined();
    },
  );

  it("reads the first of repeated headers", () => {
    expect(parseRetryAfterMs(["3", "9"], nowMs)).toBe(3000);
  });
});
