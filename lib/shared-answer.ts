/**
 * `load` behind a one-entry cache: callers within `ttlMs` of the last answer get that answer, and
 * callers while a load runs share it (a single flight), so a burst of N calls costs one load. An
 * answer that fails is kept as long as one that succeeds.
 */
export function sharedAnswer<T>(ttlMs: number, load: () => Promise<T>, now = () => Date.now()): () => Promise<T> {
  let last: { answer: Promise<T>; settledAt: number | undefined } | undefined;
  return () => {
    if (last && (last.settledAt === undefined || now() - last.settledAt < ttlMs)) return last.answer;
    const entry: { answer: Promise<T>; settledAt: number | undefined } = { answer: load(), settledAt: undefined };
    const settled = () => {
      entry.settledAt = now();
    };
    entry.answer.then(settled, settled);
    last = entry;
    return entry.answer;
  };
}
