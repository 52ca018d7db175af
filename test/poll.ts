// The project's one polling helper: every test that waits for a state waits here, on the state
// with a generous deadline, never on a bare sleep (STYLE.md §8). A deadline only bounds a test that
// would otherwise hang; a busy machine makes a wait slower, not a failure.
//
// Test helpers are named for what they do. Those under test/ (this file, http.ts, system.ts, ...)
// are all test code, so their names say nothing more; a helper that lives beside the code it
// serves, outside test/, is its folder's `_testing.ts` (lib/bus/_testing.ts, lib/db/_testing.ts),
// so that tools can tell it from the code (test/boundaries.test.ts skips `_testing` files).

/**
 * Polls `attempt` until `done` holds, every `intervalMs`, failing after `timeoutMs` with the last
 * value.
 */
export async function pollUntil<T>(
  attempt: () => T | Promise<T>,
  done: (value: T) => boolean,
  timeoutMs: number,
  intervalMs = 50,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await attempt();
    if (done(value)) return value;
    if (performance.now() > deadline)
      throw new Error(`not done within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** pollUntil for a condition: waits until `check` holds, failing with `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  await pollUntil(check, Boolean, timeoutMs, 20).catch((err: Error) => {
    throw new Error(`waiting for ${what}: ${err.message}`);
  });
}
