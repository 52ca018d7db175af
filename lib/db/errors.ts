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

/** SQLSTATEs of a server that went away or would not take the connection (class 08 aside). */
const LOST_SQLSTATES = new Set([
  "57P01", // admin_shutdown: pg_terminate_backend, a fast shutdown, a failover
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now: starting up or in recovery
  "53300", // too_many_connections
]);

/**
 * Node's socket errors when the server cannot be reached or the connection dies: only with a
 * `syscall`, as libuv's carry, so that the ECONNRESET of an HTTP client that went away mid-body
 * (Node's "aborted", which has none) is not taken for the database's.
 */
const LOST_SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH"]);

/** pg's own errors for a connection that ended under it, or a pool that could not get one in time. */
const LOST_MESSAGES = [
  "Connection terminated",
  "Client has encountered a connection error and is not queryable",
  "timeout exceeded when trying to connect",
];

/**
 * True when `err` is the loss of the database connection rather than a fault of the statement: the
 * server terminated the session (a failover, a restart, pg_terminate_backend), refused or dropped
 * the socket, or the pool could not connect. The infrastructure's fault, not the caller's: the
 * work failed as a whole (a transaction rolled back with its connection) and may be tried again,
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

/**
 * Runs an idempotent read, and once more if the connection it ran on was lost: after a failover or
 * pg_terminate_backend the pool's next connection is a fresh one, so the request that happened to
 * hold a dropped connection still gets its answer. Only for reads: a write whose connection died
 * may have committed.
 */
export async function readRetryingConnectionLoss<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!isConnectionLoss(err)) throw err;
    return read();
  }
}
