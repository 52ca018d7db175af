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
