import { describe, expect, it, onTestFinished, vi } from "vitest";
import { waitFor } from "../../test/poll.js";
import type { Db } from "../db/types.js";
import { startWorker } from "./worker.js";

describe("startWorker", () => {
  it("runs rounds back to back while they report more work, then waits for the interval (only its rounds are polled)", async () => {
    // On the fake clock: the loop's pauses are timers, so the minute passes when the test says.
    vi.useFakeTimers();
    onTestFinished(() => {
      vi.useRealTimers();
    });
    let rounds = 0;
    let backlog = 3;
    const polls: boolean[] = [];
    const worker = startWorker({
      name: "test",
      intervalMs: 60_000,
      round: async (_signal, polled) => {
        rounds++;
        polls.push(polled === true);
        backlog = Math.max(0, backlog - 1);
        return backlog > 0;
      },
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(rounds).toBe(3);
    // The third round emptied the backlog: the next one waits for the minute, or a nudge.
    await vi.advanceTimersByTimeAsync(59_999);
    expect(rounds).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(rounds).toBe(4);
    worker.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(rounds).toBe(5);
    // The first round, those a full round asked for and a nudged one are not polls: a relay reads its batch at once.
    expect(polls).toEqual([false, false, false, true, false]);
    vi.useRealTimers();
    await worker.stop();
  });

  it("starts another round after a nudge that came while a round ran, instead of sleeping through it", async () => {
    let rounds = 0;
    let release: () => void = () => {};
    const worker = startWorker({
      name: "test",
      intervalMs: 60_000,
      round: async () => {
        rounds++;
        if (rounds === 1) await new Promise<void>((resolve) => (release = resolve));
        return false;
      },
    });
    await waitFor("the first round", () => rounds === 1);
    worker.nudge();
    release();
    await waitFor("the nudged round", () => rounds === 2);
    await worker.stop();
  });

  it("polls slowly while its LISTEN holds, every interval once it is lost, and listens again", async () => {
    vi.useFakeTimers();
    onTestFinished(() => {
      vi.useRealTimers();
    });
    // The Db's LISTEN as the worker sees it: each call answered by the next outcome, `lose` drops the live one.
    const outcomes = ["ok", "fail", "ok"];
    let listens = 0;
    let lose: () => void = () => {};
    const db = {
      listen: async (_channel: string, _onNotify: (payload: string) => void, onLost?: (err: Error) => void) => {
        listens++;
        if (outcomes.shift() === "fail") throw new Error("connection refused");
        lose = () => onLost?.(new Error("terminated"));
        return async () => {};
      },
    } as unknown as Db;
    let rounds = 0;
    const worker = startWorker({
      name: "test",
      intervalMs: 1_000,
      wakeOn: { db, channel: "test", pollMs: 60_000 },
      round: async () => {
        rounds++;
        return false;
      },
    });
    await vi.advanceTimersByTimeAsync(0);
    expect([listens, rounds]).toEqual([1, 1]);
    // Listening: the next poll is a minute away.
    await vi.advanceTimersByTimeAsync(59_999);
    expect(rounds).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(rounds).toBe(2);
    // Lost: a round at once (what was committed meanwhile), a LISTEN again (refused), then a poll every second
    // and another LISTEN a second after the refusal, which holds: a round once it does, then back to the minute.
    lose();
    await vi.advanceTimersByTimeAsync(0);
    expect([listens, rounds]).toEqual([2, 3]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect([listens, rounds]).toEqual([3, 5]);
    await vi.advanceTimersByTimeAsync(59_999);
    expect(rounds).toBe(5);
    await vi.advanceTimersByTimeAsync(1);
    expect([listens, rounds]).toEqual([3, 6]);
    vi.useRealTimers();
    await worker.stop();
  });

  it("backs off with doubling waits while rounds fail, and recovers", async () => {
    const starts: number[] = [];
    await using _worker = startWorker({
      name: "test",
      intervalMs: 60_000,
      backoff: { baseMs: 40, maxMs: 1_000 },
      round: async () => {
        starts.push(performance.now());
        if (starts.length <= 3) throw new Error("down");
        return false;
      },
    });
    await waitFor("the round after three failures", () => starts.length === 4);
    const waits = starts.slice(1).map((at, i) => at - (starts[i] as number));
    expect(waits[0]).toBeGreaterThanOrEqual(38);
    expect(waits[1]).toBeGreaterThanOrEqual(78);
    expect(waits[2]).toBeGreaterThanOrEqual(158);
  });

  it("stop waits for the running round, and aborts one that outlasts the grace", async () => {
    let aborted = false;
    let entered = false;
    const worker = startWorker({
      name: "test",
      intervalMs: 60_000,
      round: (signal) =>
        new Promise<boolean>((resolve) => {
          entered = true;
          signal.addEventListener("abort", () => {
            aborted = true;
            resolve(false);
          });
        }),
    });
    await waitFor("the round", () => entered);
    const started = performance.now();
    await worker.stop(200);
    expect(aborted).toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
  });
});
