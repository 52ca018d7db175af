import type { Db } from "../db/types.js";
import { logger } from "../log.js";

const log = logger("lib:worker");

/** How long stop() lets a running round finish before aborting it (operations.md: drain up to 10 s). */
export const DRAIN_MS = 10_000;

export type WorkerSpec = {
  /** Names the loop in logs. */
  name: string;
  /**
   * One round of work. Resolves to true when more work is waiting right now (a full batch), so the
   * next round starts at once; to a number of milliseconds when the next work falls due sooner than
   * `intervalMs` (a scheduled retry); else false. `signal` aborts when stop() gave up waiting.
   */
  round(signal: AbortSignal): Promise<boolean | number>;
  /** The wait between rounds when nothing wakes the loop: the poll behind `wakeOn`, or the timer. */
  intervalMs: number;
  /** A NOTIFY channel (on `db`) that starts the next round at once. */
  wakeOn?: { db: Db; channel: string };
  /** Waits after a failed round, doubling from `baseMs` up to `maxMs`. */
  backoff?: { baseMs: number; maxMs: number };
  /**
   * Called once with the loop's nudge, for work that wakes the loop itself: work a round started
   * and did not wait for (an HTTP delivery) frees its slot later.
   */
  started?(nudge: () => void): void;
  /**
   * On stop, after the last round: waits for the work rounds started and did not wait for, within
   * the same drain. `signal` aborts when the drain is over.
   */
  drain?(signal: AbortSignal): Promise<void>;
};

/** A running loop: nudge() starts the next round early; stop() ends it within the drain. */
export type Worker = { nudge(): void; stop(graceMs?: number): Promise<void> } & AsyncDisposable;

/**
 * The one background loop of the platform (outbox relay, sweeps, pruning, deliveries): it runs
 * `round` one at a time, wakes on NOTIFY or after `intervalMs`, backs off exponentially while
 * rounds fail, and stops without starting another round. A notification that arrives during a
 * round is remembered, so the loop never sleeps through work committed while it was busy.
 */
export function startWorker(spec: WorkerSpec): Worker {
  const backoff = spec.backoff ?? { baseMs: 100, maxMs: 5_000 };
  const abort = new AbortController();
  let stopping = false;
  let woken = false;
  let wake: (() => void) | undefined;
  const nudge = () => {
    woken = true;
    wake?.();
  };
  // Ends early on nudge() when `wakeable`, and always on stop().
  const pause = (ms: number, wakeable: boolean) =>
    new Promise<void>((resolve) => {
      if (stopping || (wakeable && woken)) return resolve();
      const timer = setTimeout(resolve, ms);
      wake = () => {
        if (!wakeable && !stopping) return;
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = undefined;
    });

  const loop = async () => {
    let unlisten: (() => Promise<void>) | undefined;
    if (spec.wakeOn) {
      try {
        unlisten = await spec.wakeOn.db.listen(spec.wakeOn.channel, nudge);
      } catch (err) {
        log.warn({ err, worker: spec.name }, "LISTEN failed; running on the timer only");
      }
    }
    let failures = 0;
    try {
      while (!stopping) {
        woken = false;
        let more: boolean | number;
        try {
          more = await spec.round(abort.signal);
          failures = 0;
        } catch (err) {
          if (stopping) break;
          failures++;
          const delayMs = Math.min(backoff.baseMs * 2 ** (failures - 1), backoff.maxMs);
          log.warn({ err, worker: spec.name, failures, delayMs }, "worker round failed; retrying");
          // Notifications do not cut a backoff short: a busy service would hammer what is down.
          await pause(delayMs, false);
          continue;
        }
        if (more === true) continue;
        await pause(more === false ? spec.intervalMs : Math.max(0, Math.min(more, spec.intervalMs)), true);
      }
    } finally {
      await unlisten?.();
    }
  };

  spec.started?.(nudge);
  const running = loop().then(() => spec.drain?.(abort.signal));
  const stop = async (graceMs = DRAIN_MS) => {
    stopping = true;
    wake?.();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        abort.abort(new Error(`worker ${spec.name} stopped`));
        resolve();
      }, graceMs);
    });
    await Promise.race([running, late]);
    await running;
    clearTimeout(timer);
  };
  return { nudge, stop, [Symbol.asyncDispose]: () => stop() };
}
