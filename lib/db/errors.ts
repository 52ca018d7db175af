/**
 * True when `err` is Postgres' unique_violation (SQLSTATE 23505), from either adapter, and, when
 * `constraint` is given, of that constraint. Stores use it to turn a duplicate into the contract's
 * error (an idempotency key, a name taken) without importing pg.
 */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, constraint: violated } = err as { code?: unknown; constraint?: unknown };
  return code === "23505" && (constraint === undefined || violated === constraint);
}

/**
 * True when `err` is a value the database refused rather than a fault of the database: Postgres'
 * data exceptions (SQLSTATE class 22: an out-of-range timestamp, a NUL in text), from either
 * adapter, or a parameter the adapter could not encode (the embedded one throws a RangeError for an
 * invalid Date). One statement's input can cause it, so a batch that fails with it can run its
 * items alone to find the one at fault.
 */
export function isDataException(err: unknown): boolean {
  if (err instanceof RangeError) return true;
  if (typeof err !== "object" || err === null) return false;
  const { code } = err as { code?: unknown };
  return typeof code === "string" && code.length === 5 && code.startsWith("22");
}
