/** Latency summary in milliseconds, from raw samples (not a histogram, so sub-millisecond values keep their precision). */
export type LatencySummary = { count: number; meanMs: number; p50Ms: number; p99Ms: number; maxMs: number };

/** The p-th percentile (0..100) of ascending `sorted`, nearest-rank: a value that was actually observed. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] as number;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function summarizeLatencies(samplesMs: Float64Array): LatencySummary {
  const sorted = Float64Array.from(samplesMs).sort();
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    count: sorted.length,
    meanMs: sorted.length ? sum / sorted.length : Number.NaN,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
  };
}

/** A growable Float64Array: a load run records one latency per response without boxing numbers. */
export function createSampleBuffer(initialCapacity = 65_536) {
  let values = new Float64Array(initialCapacity);
  let length = 0;
  return {
    push(value: number) {
      if (length === values.length) {
        const grown = new Float64Array(values.length * 2);
        grown.set(values);
        values = grown;
      }
      values[length++] = value;
    },
    get length() {
      return length;
    },
    values: () => values.subarray(0, length),
  };
}
