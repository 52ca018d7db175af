import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { abortable, Deadline } from "./deadline.js";

// On the fake clock: a deadline is a timer, so its time passes when the test says.
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("Deadline", () => {
  it("aborts with a TimeoutError after its time, not before, waking abortable's waiter", async () => {
    const deadline = new Deadline(30);
    const waiting = abortable(deadline, new Promise(() => {}));
    const outcome = waiting.then(
      () => "resolved",
      (err: Error) => err.name,
    );
    await vi.advanceTimersByTimeAsync(29);
    expect(deadline.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toBe("TimeoutError");
    expect(deadline.aborted).toBe(true);
    await expect(abortable(deadline, Promise.resolve(1))).rejects.toMatchObject({ name: "TimeoutError" });
  });

  it("never aborts once cleared, and abortable passes the promise's outcome through and lets go", async () => {
    const deadline = new Deadline(20);
    expect(await abortable(deadline, Promise.resolve("answer"))).toBe("answer");
    await expect(abortable(deadline, Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(deadline.listenerCount("abort")).toBe(0);
    deadline.clear();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(deadline.aborted).toBe(false);
  });
});
