/** How a batcher groups its calls into runs: see createBatcher. */
export type BatchOptions<I, O> = {
  /**
   * Runs one batch: resolves to one result per item, in the items' order. A result may be a
   * promise, for work of an item that need not hold the run's turn: the run ends (and the next may
   * start) when `run` resolves, and the item's call settles as that promise does.
   */
  run(items: readonly I[]): Promise<readonly O[]>;
  /** The most items in one run; calls beyond it go into the next run. */
  maxBatch: number;
  /** The most runs at once; calls made while that many run wait, and go together into the next. */
  maxRunning: number;
  /**
   * True for an error that one item can cause on its own (a value the database refuses): a run of
   * several items that fails with it runs each item again alone, one after another in order, so
   * that the item at fault fails alone and the others get their results. Any other error fails every call of the run, and only
   * those. Without it, every error fails the run's calls.
   */
  isolate?(err: unknown): boolean;
};

/** One call: resolves to its item's result, or rejects with the error of its item's run. */
export type Batcher<I, O> = (item: I) => Promise<O>;

type Call<I, O> = { item: I; resolve(result: O): void; reject(err: unknown): void };

/**
 * Groups concurrent calls per tick into one run: the calls made during one turn of the event loop
 * (everything before its check phase, where `setImmediate` callbacks run) go into one run of at
 * most `maxBatch` items. While `maxRunning` runs are busy, calls wait and are grouped into the next
 * run, so the batches grow with the load instead of the number of statements. Each caller gets its
 * own item's result; an error fails the calls of its run only (see `isolate`).
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
