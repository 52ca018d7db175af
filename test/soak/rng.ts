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
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
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
