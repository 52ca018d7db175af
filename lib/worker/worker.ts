import type { Db } from "../db/types.js";
import { logger } from "../log.js";

const log = logger("lib:worker");

/** stop() lets a running round finish this long before aborting it (operations.md: drain up to 10 s). */
export const DRAIN_MS = 10_000;

export type WorkerSpec = {
  name: string;
  /**
   * Resolves to true when more work is waiting now (the next round starts at once), to milliseconds when
   * work falls due sooner than `intervalMs`, else false. `signal` aborts when stop() gave up waiting.
   */
  round(signal: AbortSignal): Promise<boolean | number>;
  /** Also the poll behind `wakeOn`. */
  intervalMs: number;
  wakeOn?: { db: Db; channel: string };
  /** Doubling from `baseMs` after each failed round. */
  backoff?: { baseMs: number; maxMs: number };
  /** For work a round started without waiting for (an HTTP delivery), which frees its slot later. */
  started?(nudge: () => void): void;
  /** On stop, after the last round, within the same drain: waits for work rounds did not wait for. */
  drain?(signal: AbortSignal): Promise<void>;
};

export type Worker = { nudge(): void; stop(graceMs?: number): Promise<void> } & AsyncDisposable;

/**
 * The platform's one background loop: rounds one at a time, woken by NOTIFY or the timer. A notification
 * during a round is remembered, so the loop never sleeps through work committed while it was busy.
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
