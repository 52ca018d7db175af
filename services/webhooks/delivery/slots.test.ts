import { describe, expect, it } from "vitest";
import { newSlots, noteClaim, occupy, planClaim, vacate } from "./slots.js";

const never = new Promise<void>(() => {});

describe("the delivery worker's slots and claim round", () => {
  it("sizes a claim by the free slots, with each subscription's attempts in flight and a held one as full", () => {
    const s = newSlots(4, 2);
    occupy(s, "d1", "s1", never);
    expect(planClaim(s, ["s9"])).toEqual({
      limit: 3,
      busy: new Map([
        ["s1", 1],
        ["s9", 2],
      ]),
    });
  });

  it("claims nothing with every slot busy, and counts that as held back", () => {
    const s = newSlots(2, 2);
    s.heldBack = false;
    occupy(s, "d1", "s1", never);
    occupy(s, "d2", "s2", never);
    expect(planClaim(s, [])).toBeUndefined();
    expect(s.heldBack).toBe(true);
  });

  it("claims again at once after a claim that filled every free slot; held back also when a subscription sat at its cap", () => {
    const s = newSlots(4, 2);
    const open = planClaim(s, []);
    if (!open) throw new Error("no plan");
    expect(noteClaim(s, open, 4)).toBe(true);
    expect(s.heldBack).toBe(true);
    expect(noteClaim(s, open, 1)).toBe(false);
    expect(s.heldBack).toBe(false);

    occupy(s, "d1", "s1", never);
    occupy(s, "d2", "s1", never);
    const capped = planClaim(s, []);
    if (!capped) throw new Error("no plan");
    expect(noteClaim(s, capped, 0)).toBe(false);
    expect(s.heldBack).toBe(true);
  });

  it("wakes a claim when a claimed attempt ends, and when a fan-out's first attempt ends only while claims are held back", () => {
    const s = newSlots(4, 2);
    occupy(s, "d1", "s1", never);
    occupy(s, "d2", "s1", never);
    s.heldBack = false;
    expect(vacate(s, "d1", "s1", true)).toBe(false);
    expect(s.bySubscription.get("s1")).toBe(1);
    expect(vacate(s, "d2", "s1", false)).toBe(true);
    expect(s.bySubscription.has("s1")).toBe(false);
    expect(s.running.size).toBe(0);

    occupy(s, "d3", "s2", never);
    s.heldBack = true;
    expect(vacate(s, "d3", "s2", true)).toBe(true);
  });
});
