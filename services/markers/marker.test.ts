import { describe, expect, it } from "vitest";
import { codeOf } from "../../test/code-of.js";
import { ICONS, parseMarkerInput, type RawMarkerInput } from "./marker.js";

const replayId = "0bd5c8e4-7b0a-4d3e-9f1e-6a0c2b7e1d9a";
const valid: RawMarkerInput = { replayId, tick: 1n, label: "x", malformedFields: [] };
const parse = (raw: Partial<RawMarkerInput>) => parseMarkerInput({ ...valid, ...raw });

describe("marker input (decisions.md §1, §3)", () => {
  it("cleans the text fields, lower-cases the colour and leaves unset fields null", () => {
    expect(parse({ replayId: replayId.toUpperCase(), label: "\u00a0 Boss down \t", tick: 0n })).toEqual({
      target: { replayId },
      tick: 0,
      label: "Boss down",
      category: null,
      colour: null,
      icon: null,
      actor: null,
    });
    expect(parse({ category: " combat ", colour: "#A1B2c3", icon: "trophy", actor: " player:alice " })).toMatchObject({
      category: "combat",
      colour: "#a1b2c3",
      icon: "trophy",
      actor: "player:alice",
    });
  });

  it.each([
    ["label", { label: "😀".repeat(120) }],
    ["category", { category: "😀".repeat(60) }],
    ["actor", { actor: "😀".repeat(80) }],
    ["an empty category", { category: "  " }],
    ["the largest tick", { tick: 9007199254740991n }],
    [
      "a server target of another UUID version",
      { replayId: undefined, serverId: "6ba7b810-9dad-11d1-80b4-00c04fd430c8" },
    ],
  ])("accepts %s at its limit", (_what, raw) => {
    expect(codeOf(() => parse(raw))).toBe("ok");
  });

  it("refuses each field with its own code, the first failure in the documented order winning", () => {
    const cases: [Partial<RawMarkerInput>, string][] = [
      [{ serverId: replayId }, "INVALID_TARGET"],
      [{ replayId: undefined }, "INVALID_TARGET"],
      [{ replayId: undefined, malformedFields: ["serverId"] }, "INVALID_SERVER_ID"],
      [{ malformedFields: ["replayId", "serverId"] }, "INVALID_TARGET"],
      [{ replayId: "", tick: -1n }, "INVALID_REPLAY_ID"],
      [{ replayId: `${replayId}0` }, "INVALID_REPLAY_ID"],
      [{ tick: undefined }, "INVALID_TICK"],
      [{ tick: -1n }, "INVALID_TICK"],
      [{ tick: 2n ** 53n }, "INVALID_TICK"],
      [{ malformedFields: ["tick"] }, "INVALID_TICK"],
      [{ label: undefined }, "INVALID_LABEL"],
      [{ label: "😀".repeat(121) }, "INVALID_LABEL"],
      [{ label: "a\u0085b" }, "INVALID_LABEL"],
      [{ category: "c".repeat(61), colour: "x" }, "INVALID_CATEGORY"],
      [{ malformedFields: ["category", "actor"] }, "INVALID_CATEGORY"],
      [{ colour: "#abcdeg", icon: "x" }, "INVALID_COLOUR"],
      [{ colour: "#abcdef " }, "INVALID_COLOUR"],
      [{ icon: "STAR", actor: "a".repeat(81) }, "INVALID_ICON"],
      [{ icon: "star " }, "INVALID_ICON"],
      [{ actor: "a".repeat(81) }, "INVALID_ACTOR"],
      [{ actor: "\u007f" }, "INVALID_ACTOR"],
    ];
    for (const [raw, code] of cases)
      expect(
        codeOf(() => parse(raw)),
        String(Object.entries(raw)),
      ).toBe(code);
  });

  it("knows exactly the spec's 15 icons", () => {
    expect([...ICONS].sort()).toEqual(
      "bed blast bookmark diamond flag flask hammer pickaxe shield skull sparkles star swords trophy user-plus"
        .split(" ")
        .sort(),
    );
  });
});
