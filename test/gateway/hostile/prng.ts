import { randomInt } from "node:crypto";

/** A small seeded PRNG (mulberry32): the same seed gives the same hostile requests, in order. */
export type Prng = {
  readonly seed: number;
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
};

export function createPrng(seed: number): Prng {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const int = (n: number) => Math.floor(next() * n);
  return {
    seed,
    next,
    int,
    pick: <T>(items: readonly T[]) => items[int(items.length)] as T,
    chance: (p: number) => next() < p,
  };
}

/** HOSTILE_SEED when set (to replay a failure), else a fresh one; printed either way. */
export function seedFromEnv(env: Record<string, string | undefined>): number {
  const raw = env.HOSTILE_SEED;
  if (raw !== undefined && raw !== "") {
    const seed = Number(raw);
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`HOSTILE_SEED must be a whole number, got ${raw}`);
    return seed;
  }
  return randomInt(2 ** 31);
}

/** HOSTILE_COUNT when set, else `fallback`. */
export function countFromEnv(env: Record<string, string | undefined>, fallback: number): number {
  const raw = env.HOSTILE_COUNT;
  if (raw === undefined || raw === "") return fallback;
  const count = Number(raw);
  if (!Number.isSafeInteger(count) || count < 1) throw new Error(`HOSTILE_COUNT must be at least 1, got ${raw}`);
  return count;
}
