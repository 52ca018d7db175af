export type BatchOptions<I, O> = {
  /**
   * One result per item, in order. A result may be a promise, for work that need not hold the run's turn:
   * the next run may start when `run` resolves, and the item's call settles with that promise.
   */
  run(items: readonly I[]): Promise<readonly O[]>;
  maxBatch: number;
  /** Calls made while that many run wait, and go together into the next. */
  maxRunning: number;
  /**
   * An error one item can cause alone: the run's items are then run again one by one, in order, so only the
   * item at fault fails. Any other error fails every call of its run.
   */
  isolate?(err: unknown): boolean;
};

export type Batcher<I, O> = (item: I) => Promise<O>;

type Call<I, O> = { item: I; resolve(result: O): void; reject(err: unknown): void };

/**
 * Groups the calls of one event-loop turn (up to `setImmediate`) into one run. While `maxRunning` runs are
 * busy, calls wait and group into the next, so batches grow with the load instead of the statements.
 */
export function createBatcher<I, O>(options: BatchOptions<I, O>): Batcher<I, O> {
  const { run, maxBatch, maxRunning, isolate } = options;
  if (!(maxBatch >= 1 && maxRunning >= 1)) throw new Error("maxBatch and maxRunning must be at least 1");
  let waiting: Call<I, O>[] = [];
  let running = 0;
  let scheduled = false;

  const schedule = () => {
    if (scheduled || running >= maxRunning || waiting.length === 0) return;
    scheduled = true;
    setImmediate(flush);
  };

  function flush(): void {
    scheduled = false;
    while (running < maxRunning && waiting.length > 0) {
      const calls = waiting.length <= maxBatch ? waiting : waiting.slice(0, maxBatch);
      waiting = calls === waiting ? [] : waiting.slice(maxBatch);
      running++;
      void settle(calls).finally(() => {
        running--;
        schedule();
      });
    }
  }

  async function settle(calls: readonly Call<I, O>[]): Promise<void> {
    let results: readonly O[];
    try {
      results = await run(calls.map((call) => call.item));
      if (results.length !== calls.length)
        throw new Error(`a batch of ${calls.length} items resolved to ${results.length} results`);
    } catch (err) {
      if (calls.length > 1 && isolate?.(err)) {
        // One after another, in the order of the calls: the run's effects stay those of that order.
        for (const call of calls) await settle([call]);
        return;
      }
      for (const call of calls) call.reject(err);
      return;
    }
    calls.forEach((call, i) => {
      call.resolve(results[i] as O);
    });
  }

  return (item) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      schedule();
    });
}
