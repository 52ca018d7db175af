import { describe, expect, it } from "vitest";
import { DomainError } from "../../lib/errors.js";
import { parseName } from "./name.js";

function code(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof DomainError ? err.code : "not a DomainError";
  }
}

describe("server names (decisions.md §1, §4)", () => {
  it.each([
    ["  alpha  ", "alpha"],
    ["\u3000全角\u00a0", "全角"],
    ["a".repeat(64), "a".repeat(64)],
    ["😀".repeat(64), "😀".repeat(64)],
    ["in ner", "in ner"],
  ])("cleans %j to %j", (raw, cleaned) => {
    expect(parseName(raw)).toBe(cleaned);
  });

  it.each([
    ["", "empty"],
    ["   ", "only white space"],
    ["a".repeat(65), "65 code points"],
    ["😀".repeat(65), "65 astral code points"],
    ["bad\u0007bell", "a control character"],
    ["tab\tinside", "a tab inside"],
  ])("refuses %j (%s) with INVALID_NAME", (raw) => {
    expect(code(() => parseName(raw))).toBe("INVALID_NAME");
  });

  it("keeps U+FEFF, which is not Unicode White_Space", () => {
    expect(parseName("\ufeffx")).toBe("\ufeffx");
  });

  it("refuses a value the gateway found to be of the wrong JSON type", () => {
    expect(code(() => parseName("", true))).toBe("INVALID_NAME");
  });
});
