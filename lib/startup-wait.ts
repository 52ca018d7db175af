import { logger } from "./log.js";

const log = logger("lib:startup");

/**
 * A dependency failing over takes seconds, and exiting at once would only crash-loop. Half the startupProbe
 * (2 s x 60), so a dependency that never comes is one clear line, not a probe's kill.
 */
export const STARTUP_WAIT_MS = 60_000;

/** Retried only while `unreachable` says so; any other failure (a wrong password) goes on at once. */
export async function whenReachable<T>(
  what: string,
  step: () => Promise<T>,
  unreachable: (err: unknown) => boolean,
  waitMs = STARTUP_WAIT_MS,
): Promise<T> {
  const deadline = Date.now() + waitMs;
  let pauseMs = 250;
  for (;;) {
    try {
      return await step();
    } catch (err) {
      if (!unreachable(err) || Date.now() + pauseMs > deadline) throw err;
      log.warn(
        { dependency: what, err: String(err), retryInMs: pauseMs },
        "a dependency is unreachable at start; waiting",
      );
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      pauseMs = Math.min(pauseMs * 2, 2_000);
    }
  }
}
