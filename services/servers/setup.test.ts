import { create } from "@bufbuild/protobuf";
import { TimestampSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { codeOf } from "../../test/code-of.js";
import { checkInTime } from "./setup.js";

const now = new Date("2026-11-25T10:00:00Z");

describe("a check-in's time", () => {
  it("is now when unset or in the future, and the time given otherwise", () => {
    expect(checkInTime(undefined, now)).toEqual(now);
    expect(checkInTime(timestampFromDate(new Date("2027-01-01T00:00:00Z")), now)).toEqual(now);
    const past = new Date("2026-11-25T09:59:00.123Z");
    expect(checkInTime(timestampFromDate(past), now)).toEqual(past);
    expect(checkInTime(create(TimestampSchema, { seconds: -62_135_596_800n }), now)).toEqual(
      new Date("0001-01-01T00:00:00Z"),
    );
  });

  it("is INVALID_ARGUMENT outside Timestamp's range or with nanos out of range", () => {
    expect(codeOf(() => checkInTime(create(TimestampSchema, { seconds: -62_135_596_801n }), now))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(codeOf(() => checkInTime(create(TimestampSchema, { seconds: 253_402_300_800n }), now))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(codeOf(() => checkInTime(create(TimestampSchema, { seconds: 0n, nanos: -1 }), now))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(codeOf(() => checkInTime(create(TimestampSchema, { seconds: 0n, nanos: 1_000_000_000 }), now))).toBe(
      "INVALID_ARGUMENT",
    );
  });
});
