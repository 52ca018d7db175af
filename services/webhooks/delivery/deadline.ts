import { EventEmitter } from "node:events";

/**
 * An attempt's timeout as undici's abort signal: an EventEmitter with `aborted` and `reason` is undici's documented
 * alternative to an AbortSignal, and an AbortController costs several times more per attempt (docs/performance.md).
 */
export class Deadline extends EventEmitter {
  aborted = false;
  reason: DOMException | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(ms: number) {
    super();
    this.timer = setTimeout(() => {
      this.aborted = true;
      this.reason = new DOMException("the attempt timed out", "TimeoutError");
      this.emit("abort");
    }, ms);
  }

  /** The attempt ended: the timer goes, and the signal never aborts. */
  clear(): void {
    clearTimeout(this.timer);
  }
}

/** The promise's outcome, or the deadline's TimeoutError as soon as it passes. */
export function abortable<T>(deadline: Deadline, promise: Promise<T>): Promise<T> {
  if (deadline.aborted) {
    // Its outcome is no longer wanted, but a rejection of it must not go unhandled.
    promise.catch(() => {});
    return Promise.reject(deadline.reason);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(deadline.reason);
    deadline.on("abort", onAbort);
    promise.then(
      (value) => {
        deadline.removeListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        deadline.removeListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
