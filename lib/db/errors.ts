/** Postgres' unique_violation (of `constraint`, when given) from either adapter, without importing pg. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, constraint: violated } = err as { code?: unknown; constraint?: unknown };
  return code === "23505" && (constraint === undefined || violated === constraint);
}

/**
 * A value the database refused (SQLSTATE class 22, or the embedded adapter's RangeError for an invalid Date):
 * one item's input causes it, so a failed batch can run its items alone to find the one at fault.
 */
export function isDataException(err: unknown): boolean {
  if (err instanceof RangeError) return true;
  if (typeof err !== "object" || err === null) return false;
  const { code } = err as { code?: unknown };
  return typeof code === "string" && code.length === 5 && code.startsWith("22");
}

const LOST_SQLSTATES = new Set([
  "57P01", // admin_shutdown: pg_terminate_backend, a fast shutdown, a failover
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now: starting up or in recovery
  "53300", // too_many_connections
]);

/** Only with a `syscall` (libuv's): an HTTP client's mid-body ECONNRESET has none and is not the database's. */
const LOST_SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH"]);

const LOST_MESSAGES = [
  "Connection terminated",
  "Client has encountered a connection error and is not queryable",
  "timeout exceeded when trying to connect",
];

/**
 * The connection was lost, not the statement at fault: the work failed as a whole and may be tried again,
 * so callers answer SERVICE_UNAVAILABLE, never INTERNAL_ERROR.
 */
export function isConnectionLoss(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, message, syscall } = err as { code?: unknown; message?: unknown; syscall?: unknown };
  if (typeof code === "string") {
    if (code.length === 5 && code.startsWith("08")) return true;
    if (LOST_SQLSTATES.has(code)) return true;
    if (LOST_SOCKET_CODES.has(code) && typeof syscall === "string") return true;
  }
  return typeof message === "string" && LOST_MESSAGES.some((m) => message.startsWith(m));
}

/** Once more after a lost connection (the pool's next is fresh). Reads only: such a write may have committed. */
export async function readRetryingConnectionLoss<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!isConnectionLoss(err)) throw err;
    return read();
  }
}

/** Postgres' serialization_failure: in READ COMMITTED, a row the statement would lock was moved to another partition. */
export function isSerializationFailure(err: unknown): boolean {
  return sqlState(err) === "40001";
}

/** Postgres' lock_not_available: lock_timeout ran out (or NOWAIT found the lock taken). */
export function isLockTimeout(err: unknown): boolean {
  return sqlState(err) === "55P03";
}

function sqlState(err: unknown): unknown {
  return typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
}

/**
 * `work` again while it fails with serialization_failure, up to `tries` runs in all: Postgres refuses so a statement
 * that would update or lock a row a concurrent transaction moved to another partition (webhooks' delivery log,
 * migration 016), which a new snapshot sees where it went. `work` must be a statement in a transaction of its own
 * or a whole transaction.
 */
export async function retryingSerializationFailure<T>(work: () => Promise<T>, tries = 5): Promise<T> {
  for (let run = 1; ; run++) {
    try {
      return await work();
    } catch (err) {
      if (run >= tries || !isSerializationFailure(err)) throw err;
    }
  }
}
