/**
 * One checked invariant: how many things it looked at, how many broke it, and a few examples of
 * those (enough to start a post-mortem, never the whole list).
 */
export type Invariant = { name: string; checked: number; violations: number; examples: string[] };

const EXAMPLES = 3;

export function invariant(name: string): Invariant & {
  /** Counts one thing checked; when `ok` is false, one violation with `example()`'s text. */
  check(ok: boolean, example: () => string): void;
} {
  const inv: Invariant = { name, checked: 0, violations: 0, examples: [] };
  return Object.assign(inv, {
    check(ok: boolean, example: () => string) {
      inv.checked++;
      if (ok) return;
      inv.violations++;
      if (inv.examples.length < EXAMPLES) inv.examples.push(example());
    },
  });
}

/** An invariant with its result as data only (what the report prints). */
export function result(inv: Invariant): Invariant {
  return { name: inv.name, checked: inv.checked, violations: inv.violations, examples: inv.examples };
}
