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
   * `polled`: the round started because the pause ran out, neither woken nor asked for by the last round (left
   * out, as where a test runs a round itself: not a poll).
   */
  round(signal: AbortSignal, polled?: boolean): Promise<boolean | number>;
  /** Also the poll behind `wakeOn` while it is not listening. */
  intervalMs: number;
  /**
   * Rounds on NOTIFY. `pollMs` (default `intervalMs`): the poll while the LISTEN holds, when notifications bring
   * the work and the poll only catches what none announced. A lost LISTEN wakes the worker, which polls every
   * `intervalMs` and listens again at once, then at most every `intervalMs` while that fails.
   */
  wakeOn?: { db: Db; channel: string; pollMs?: number };
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
  // Ends early on nudge() when `wakeable`, and always on stop(); resolves to true when its time ran out.
  const pause = (ms: number, wakeable: boolean) =>
    new Promise<boolean>((resolve) => {
      if (stopping || (wakeable && woken)) return resolve(false);
      const timer = setTimeout(() => resolve(true), ms);
      wake = () => {
        if (!wakeable && !stopping) return;
        clearTimeout(timer);
        resolve(false);
      };
    }).finally(() => {
      wake = undefined;
    });

  // The LISTEN behind wakeOn: one attempt at a time, never awaited by a round (a connect can hang).
  let unlisten: (() => Promise<void>) | undefined;
  let listening = false;
  let listenFailedAt = Number.NEGATIVE_INFINITY;
  let listenAttempt: Promise<void> | undefined;
  const listen = () => {
    const wakeOn = spec.wakeOn;
    if (!wakeOn || listening || listenAttempt || stopping || Date.now() - listenFailedAt < spec.intervalMs) return;
    listenAttempt = (async () => {
      await unlisten?.();
      unlisten = undefined;
      try {
        unlisten = await wakeOn.db.listen(wakeOn.channel, nudge, () => {
          listening = false;
          nudge();
        });
        listening = true;
        // A round now: what was committed while no LISTEN was in place was announced to nobody.
        nudge();
      } catch (err) {
        listenFailedAt = Date.now();
        log.warn({ err, worker: spec.name }, "LISTEN failed; polling meanwhile");
      }
    })().finally(() => {
      listenAttempt = undefined;
    });
  };
  const idleMs = () => (listening ? (spec.wakeOn?.pollMs ?? spec.intervalMs) : spec.intervalMs);

  const loop = async () => {
    // The first LISTEN before the first round, so that nothing committed after that round goes unheard.
    listen();
    await listenAttempt;
    let failures = 0;
    // The last pause ran out; a notification that came as it did still makes the round a woken one.
    let ranOut = false;
    try {
      while (!stopping) {
        const polled = ranOut && !woken;
        woken = false;
        ranOut = false;
        listen();
        let more: boolean | number;
        try {
          more = await spec.round(abort.signal, polled);
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
        ranOut = await pause(more === false ? idleMs() : Math.max(0, Math.min(more, idleMs())), true);
      }
    } finally {
      await listenAttempt;
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
