import { logger } from "./log.js";

const log = logger("lib:startup");

/**
 * How long a starting process waits for Postgres or NATS to answer before it gives up: a
 * dependency restarting or failing over (a NATS pod rescheduled, a Postgres switchover) takes
 * seconds, and a process that exited at once would only crash-loop meanwhile. Half the services'
 * startupProbe (2 s x 60), so a dependency that never comes is still one clear line, not a probe's
 * kill.
 */
export const STARTUP_WAIT_MS = 60_000;

/**
 * Runs a start-up step that needs a dependency (`what`), again while it fails as `unreachable`
 * says, with a growing pause (0.25 s to 2 s), until `waitMs` has passed; then its last error goes
 * on. Any other failure (a wrong password, a bad migration) goes on at once.
 */
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
