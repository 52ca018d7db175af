import { describe, expect, it } from "vitest";
import { abortable, Deadline } from "./deadline.js";

describe("Deadline", () => {
  it("aborts with a TimeoutError after its time, waking abortable's waiter", async () => {
    const deadline = new Deadline(30);
    const started = performance.now();
    await expect(abortable(deadline, new Promise(() => {}))).rejects.toMatchObject({ name: "TimeoutError" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(deadline.aborted).toBe(true);
    await expect(abortable(deadline, Promise.resolve(1))).rejects.toMatchObject({ name: "TimeoutError" });
  });

  it("never aborts once cleared, and abortable passes the promise's outcome through and lets go", async () => {
    const deadline = new Deadline(20);
    expect(await abortable(deadline, Promise.resolve("answer"))).toBe("answer");
    await expect(abortable(deadline, Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(deadline.listenerCount("abort")).toBe(0);
    deadline.clear();
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(deadline.aborted).toBe(false);
  });
});
