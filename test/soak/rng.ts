import { createPrng } from "../gateway/hostile/prng.js";

/**
 * A seeded random source (mulberry32), so that a run's load and fault schedule can be replayed
 * from its seed. Each user takes its own stream (`fork`), so that one part drawing more numbers
 * (a slower run doing fewer requests) does not shift another part's choices.
 */
export type Rng = {
  next(): number;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  fork(label: string): Rng;
};

export function createRng(seed: number): Rng {
  const { next } = createPrng(seed);
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (items) => items[Math.floor(next() * items.length)] as (typeof items)[number],
    chance: (p) => next() < p,
    fork(label) {
      let h = seed >>> 0;
      for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
      return createRng(h);
    },
  };
}
