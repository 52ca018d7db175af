import { type LoadResult, type LoadSpec, type LoadTarget, runLoad } from "./load.js";
import { median } from "./stats.js";

/**
 * How many short rounds each side of a comparison is measured in. This machine is shared, and the
 * same work costs it more CPU in some minutes than in others: the same code under the same load
 * cost twice as much CPU per request in one run as two runs later (docs/performance.md). Measured once each, a side that drew the slow minute loses the ratio by as much. Measured
 * in alternating rounds (A B B A A B B A), both sides draw the same minutes.
 */
export const ROUNDS = 4;

/** The warm-up of a round after a side's first: its connections are new, its processes are not. */
const LATER_ROUND_WARMUP_S = 1;

/** The order of ROUNDS rounds of two sides, the first side first: A B, B A, A B, B A. */
export function roundOrder(rounds: number): [0 | 1, 0 | 1][] {
  return Array.from({ length: rounds }, (_, round) => (round % 2 === 0 ? [0, 1] : [1, 0]));
}

/**
 * Measures two sides (their names in `targets`, the first going first) at one concurrency in ROUNDS
 * alternating rounds that share `durationS` between them (each side's measured time is `durationS`
 * in all), and merges each side's rounds (mergeRounds). Resolves to the merged results, by name.
 */
export async function runAlternating(
  sides: readonly [string, string],
  targets: Readonly<Record<string, LoadTarget>>,
  load: Omit<LoadSpec, "target">,
  rounds = ROUNDS,
): Promise<Record<string, LoadResult>> {
  const perSide: [LoadResult[], LoadResult[]] = [[], []];
  for (const [round, order] of roundOrder(rounds).entries()) {
    for (const index of order) {
      const name = sides[index];
      const target = targets[name];
      if (!target) throw new Error(`no load target named ${name}`);
      const result = await runLoad({
        ...load,
        target,
        durationS: load.durationS / rounds,
        warmupS: round === 0 ? load.warmupS : Math.min(load.warmupS, LATER_ROUND_WARMUP_S),
      });
      perSide[index].push(result);
    }
  }
  return { [sides[0]]: mergeRounds(perSide[0]), [sides[1]]: mergeRounds(perSide[1]) };
}

const sumOf = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0);

function addCounts(into: Record<string, number>, from: Record<string, number> | undefined): Record<string, number> {
  for (const [key, n] of Object.entries(from ?? {})) into[key] = (into[key] ?? 0) + n;
  return into;
}

/**
 * One side's rounds as one run: requests, errors, statuses and CPU summed, req/s over the rounds'
 * whole measured time, the mean latency over every request; p50 and p99 are the median of the
 * rounds' own (the load worker keeps no samples across rounds), the max the largest.
 */
export function mergeRounds(results: readonly LoadResult[]): LoadResult {
  const first = results[0];
  if (first === undefined) throw new Error("no rounds to merge");
  if (results.length === 1) return first;
  const requests = sumOf(results.map((r) => r.requests));
  const elapsedS = sumOf(results.map((r) => r.elapsedS));
  const count = sumOf(results.map((r) => r.latency.count));
  const errorKinds = results.some((r) => r.errorKinds)
    ? results.reduce((kinds, r) => addCounts(kinds, r.errorKinds), {} as Record<string, number>)
    : undefined;
  const sizes = results.filter((r) => r.bytesPerResponse !== undefined);
  return {
    connections: first.connections,
    elapsedS,
    requests,
    rps: elapsedS > 0 ? requests / elapsedS : 0,
    latency: {
      count,
      meanMs: count > 0 ? sumOf(results.map((r) => r.latency.meanMs * r.latency.count)) / count : Number.NaN,
      p50Ms: median(results.map((r) => r.latency.p50Ms)),
      p99Ms: median(results.map((r) => r.latency.p99Ms)),
      maxMs: Math.max(...results.map((r) => r.latency.maxMs)),
    },
    errors: sumOf(results.map((r) => r.errors)),
    ...(errorKinds ? { errorKinds } : {}),
    non2xx: sumOf(results.map((r) => r.non2xx)),
    statusCounts: results.reduce((counts, r) => addCounts(counts, r.statusCounts), {} as Record<string, number>),
    bytesPerResponse: sizes.length > 0 ? median(sizes.map((r) => r.bytesPerResponse as number)) : undefined,
    cpuMs: results.reduce((cpu, r) => addCounts(cpu, r.cpuMs), {} as Record<string, number>),
    machineBusyMs: sumOf(results.map((r) => r.machineBusyMs)),
    rounds: results.length,
  };
}
