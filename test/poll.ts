/**
 * Polls `attempt` until `done` holds, every `intervalMs`, failing after `timeoutMs` with the last
 * value: tests wait on a state with a deadline, never with a bare sleep (STYLE.md §8).
 */
export async function pollUntil<T>(
  attempt: () => Promise<T>,
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
