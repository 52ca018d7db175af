import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema, timestampDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { timestampIso } from "./timestamp-iso.js";

const ts = (seconds: bigint, nanos = 0): Timestamp => create(TimestampSchema, { seconds, nanos });
const reference = (t: Timestamp) => timestampDate(t).toISOString();

describe("timestampIso", () => {
  it("writes what timestampDate(ts).toISOString() writes, at the edges of days, months, leap years and eras", () => {
    const days = [
      "1970-01-01",
      "1969-12-31",
      "2000-02-29",
      "2100-02-28",
      "2100-03-01",
      "1600-02-29",
      "2024-12-31",
      "0000-01-01",
      "0001-03-01",
      "0999-12-31",
      "9999-12-31",
    ];
    for (const day of days) {
      for (const offsetMs of [0, 1, 999, 1000, 59_999, 3_599_999, 86_399_999]) {
        const ms = Date.parse(`${day}T00:00:00Z`) + offsetMs;
        const seconds = BigInt(Math.floor(ms / 1000));
        const nanos = (ms - Math.floor(ms / 1000) * 1000) * 1_000_000;
        const t = ts(seconds, nanos);
        expect(timestampIso(t), `${day} +${offsetMs}`).toBe(reference(t));
      }
    }
  });

  it("rounds to the nearest millisecond, as timestampDate does", () => {
    expect(timestampIso(ts(0n, 499_999))).toBe("1970-01-01T00:00:00.000Z");
    expect(timestampIso(ts(0n, 500_000))).toBe("1970-01-01T00:00:00.001Z");
    expect(timestampIso(ts(-1n, 999_999_999))).toBe("1970-01-01T00:00:00.000Z");
    expect(timestampIso(ts(59n, 999_600_000))).toBe("1970-01-01T00:01:00.000Z");
  });

  it("matches on random timestamps across years 0-9999 and beyond them", () => {
    for (let i = 0; i < 20_000; i++) {
      const seconds = BigInt(Math.floor((Math.random() * 2 - 0.6) * 320_000_000_000));
      const t = ts(seconds, Math.floor(Math.random() * 1_000_000_000));
      expect(timestampIso(t)).toBe(reference(t));
    }
  });

  it("fails as timestampDate does where a Date cannot hold the instant", () => {
    const t = ts(9_000_000_000_000_000n);
    expect(() => reference(t)).toThrow(RangeError);
    expect(() => timestampIso(t)).toThrow(RangeError);
  });
});
