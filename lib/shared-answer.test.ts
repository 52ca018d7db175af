import { describe, expect, it } from "vitest";
import { sharedAnswer } from "./shared-answer.js";

describe("sharedAnswer", () => {
  it("runs one load for callers in flight and within the ttl, and a new one after it", async () => {
    let clock = 0;
    let loads = 0;
    let release: (value: number) => void = () => {};
    const answer = sharedAnswer(
      1000,
      () => {
        loads++;
        return new Promise<number>((resolve) => (release = resolve));
      },
      () => clock,
    );
    const first = Promise.all(Array.from({ length: 50 }, () => answer()));
    release(loads);
    expect(await first).toEqual(Array(50).fill(1));
    clock = 999;
    expect(await answer()).toBe(1);
    expect(loads).toBe(1);
    clock = 1000;
    const again = answer();
    release(loads);
    expect(await again).toBe(2);
  });

  it("keeps a failure for the ttl too", async () => {
    let clock = 0;
    let loads = 0;
    const answer = sharedAnswer(
      1000,
      async () => {
        loads++;
        throw new Error("down");
      },
      () => clock,
    );
    await expect(answer()).rejects.toThrow("down");
    await expect(answer()).rejects.toThrow("down");
    expect(loads).toBe(1);
    clock = 2000;
    await expect(answer()).rejects.toThrow("down");
    expect(loads).toBe(2);
  });
});
