import { describe, expect, it } from "vitest";
import { DomainError } from "./errors.js";
import { isUuid, newTimeOrderedId, parseUuid, parseUuidV4 } from "./ids.js";

const v4 = "3F2504E0-4F89-41D3-9A0C-0305E82C3301";
const v7 = "01890a5d-ac96-774b-bcce-b302099a8057";
const v1 = "c232ab00-9414-11ec-b3c8-9f6bdeced846";

describe("ids", () => {
  it("newTimeOrderedId makes version 7 UUIDs that sort in the order of their milliseconds", () => {
    const at = Date.UTC(2026, 11, 1, 22, 37);
    const ids = [at, at + 1, at + 1_000, at + 86_400_000].map((ms) => newTimeOrderedId(ms));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(ids[0]?.replaceAll("-", "").slice(0, 12)).toBe(at.toString(16).padStart(12, "0"));
    expect(newTimeOrderedId(at)).not.toBe(newTimeOrderedId(at));
  });

  it.each([
    ["a v4 in upper case", v4, true],
    ["a v7", v7, true],
    ["a v1", v1, true],
    ["the nil UUID", "00000000-0000-0000-0000-000000000000", true],
    ["no hyphens", v4.replaceAll("-", ""), false],
    ["braces", `{${v4}}`, false],
    ["a trailing space", `${v4} `, false],
    ["a non-hex digit", `${v4.slice(0, -1)}g`, false],
    ["empty", "", false],
  ])("parseUuid takes any version in the canonical form: %s", (_name, text, ok) => {
    expect(isUuid(text)).toBe(ok);
    if (ok) expect(parseUuid(text, "INVALID_SERVER_ID", "server id")).toBe(text.toLowerCase());
    else expect(() => parseUuid(text, "INVALID_SERVER_ID", "server id")).toThrow(DomainError);
  });

  it.each([
    ["a v4", v4, true],
    ["a v7", v7, false],
    ["a v1", v1, false],
    ["a v4 with the NCS variant", "3f2504e0-4f89-41d3-7a0c-0305e82c3301", false],
    ["a v4 with the Microsoft variant", "3f2504e0-4f89-41d3-ca0c-0305e82c3301", false],
    ["the nil UUID", "00000000-0000-0000-0000-000000000000", false],
  ])("parseUuidV4 takes only version 4 with the RFC 9562 variant: %s", (_name, text, ok) => {
    if (ok) expect(parseUuidV4(text, "INVALID_REPLAY_ID", "replay id")).toBe(text.toLowerCase());
    else
      expect(() => parseUuidV4(text, "INVALID_REPLAY_ID", "replay id")).toThrow(
        expect.objectContaining({ code: "INVALID_REPLAY_ID" }),
      );
  });
});
