import { describe, expect, it } from "vitest";
import { type BatchOptions, createBatcher } from "./batch.js";

const nextTick = () => new Promise((resolve) => setImmediate(resolve));

/** A batcher whose runs are recorded, and answer each item doubled unless `run` is given. */
function recorded(options: Partial<BatchOptions<number, number>> = {}) {
  const runs: number[][] = [];
  const batch = createBatcher<number, number>({
    maxBatch: 100,
    maxRunning: 1,
    ...options,
    run(items) {
      runs.push([...items]);
      return options.run ? options.run(items) : Promise.resolve(items.map((item) => item * 2));
    },
  });
  return { batch, runs };
}

/** A promise resolved from outside. */
function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("createBatcher", () => {
  it("runs the calls of one tick together, and answers each caller with its own item's result", async () => {
    const { batch, runs } = recorded();
    const answers = await Promise.all([3, 1, 2, 1].map((item) => batch(item)));
    expect(answers).toEqual([6, 2, 4, 2]);
    expect(runs).toEqual([[3, 1, 2, 1]]);
  });

  it("runs calls of later ticks apart when a run is free", async () => {
    const { batch, runs } = recorded({ maxRunning: 2 });
    const first = batch(1);
    await nextTick();
    const second = batch(2);
    expect(await Promise.all([first, second])).toEqual([2, 4]);
    expect(runs).toEqual([[1], [2]]);
  });

  it("puts at most maxBatch items in a run", async () => {
    const { batch, runs } = recorded({ maxBatch: 2, maxRunning: 3 });
    expect(await Promise.all([1, 2, 3, 4, 5].map((item) => batch(item)))).toEqual([2, 4, 6, 8, 10]);
    expect(runs).toEqual([[1, 2], [3, 4], [5]]);
  });

  it("starts no more than maxRunning runs; the calls made meanwhile wait and go together into the next", async () => {
    const gate = deferred();
    let running = 0;
    let mostRunning = 0;
    const { batch, runs } = recorded({
      maxBatch: 2,
      maxRunning: 2,
      async run(items) {
        running++;
        mostRunning = Math.max(mostRunning, running);
        await gate.promise;
        running--;
        return items.map((item) => item * 2);
      },
    });
    const calls = [batch(1), batch(2), batch(3), batch(4), batch(5)];
    await nextTick();
    calls.push(batch(6));
    await nextTick();
    calls.push(batch(7));
    await nextTick();
    expect(runs).toEqual([
      [1, 2],
      [3, 4],
    ]);
    gate.resolve();
    expect(await Promise.all(calls)).toEqual([2, 4, 6, 8, 10, 12, 14]);
    expect(runs).toEqual([[1, 2], [3, 4], [5, 6], [7]]);
    expect(mostRunning).toBe(2);
  });

  it("ends a run's turn when it resolves, though a result is a promise that settles later", async () => {
    const slow = deferred();
    const runs: number[][] = [];
    const batch = createBatcher<number, Promise<number>>({
      maxBatch: 100,
      maxRunning: 1,
      run: async (items) => {
        runs.push([...items]);
        return items.map((item) => (item === 1 ? slow.promise.then(() => 10) : Promise.resolve(item * 2)));
      },
    });
    const first = batch(1);
    await nextTick();
    await nextTick();
    // The first run's item 1 has not settled, yet the next run starts and answers.
    expect(await batch(2)).toBe(4);
    expect(runs).toEqual([[1], [2]]);
    slow.resolve();
    expect(await first).toBe(10);
  });

  it("fails every call of a failed run, and only those", async () => {
    const { batch, runs } = recorded({
      maxBatch: 2,
      maxRunning: 2,
      run: async (items) => {
        if (items.includes(3)) throw new Error("connection lost");
        return items.map((item) => item * 2);
      },
    });
    const outcomes = await Promise.allSettled([1, 2, 3, 4].map((item) => batch(item)));
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value : (o.reason as Error).message))).toEqual([
      2,
      4,
      "connection lost",
      "connection lost",
    ]);
    expect(runs).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });

  it("runs each item of a run alone when it fails with an error to isolate: the item at fault fails alone", async () => {
    const refused = new Error("value refused");
    const { batch, runs } = recorded({
      isolate: (err) => err === refused,
      run: async (items) => {
        if (items.includes(13)) throw refused;
        return items.map((item) => item * 2);
      },
    });
    const outcomes = await Promise.allSettled([1, 13, 2].map((item) => batch(item)));
    expect(outcomes).toEqual([
      { status: "fulfilled", value: 2 },
      { status: "rejected", reason: refused },
      { status: "fulfilled", value: 4 },
    ]);
    expect(runs).toEqual([[1, 13, 2], [1], [13], [2]]);
  });

  it("does not run the items again for an error that is not to be isolated, nor for a run of one", async () => {
    const lost = new Error("connection lost");
    const { batch, runs } = recorded({
      isolate: (err) => err !== lost,
      run: () => Promise.reject(lost),
    });
    const outcomes = await Promise.allSettled([1, 2].map((item) => batch(item)));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);
    await expect(batch(3)).rejects.toBe(lost);
    expect(runs).toEqual([[1, 2], [3]]);
  });

  it("fails the calls of a run that throws at once, or resolves to a result count other than its items'", async () => {
    const thrower = recorded({
      run: () => {
        throw new Error("bad statement");
      },
    });
    await expect(Promise.all([thrower.batch(1), thrower.batch(2)])).rejects.toThrow("bad statement");
    const short = recorded({ run: async () => [1] });
    const outcomes = await Promise.allSettled([short.batch(1), short.batch(2)]);
    expect(outcomes.map((o) => o.status === "rejected" && (o.reason as Error).message)).toEqual([
      "a batch of 2 items resolved to 1 results",
      "a batch of 2 items resolved to 1 results",
    ]);
    // The batcher is still usable after failed runs.
    expect(await recorded().batch(4)).toBe(8);
    expect(await thrower.batch(5).catch(() => "failed")).toBe("failed");
  });

  it("refuses a batch size or a number of runs below one", () => {
    const run = async () => [];
    expect(() => createBatcher({ run, maxBatch: 0, maxRunning: 1 })).toThrow();
    expect(() => createBatcher({ run, maxBatch: 1, maxRunning: 0 })).toThrow();
  });
});
