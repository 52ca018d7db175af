import pg from "pg";
import { logger } from "../log.js";
import { watchPool } from "../metrics.js";
import { createStatementNames, isStalePreparedStatement } from "./statements.js";
import { createTimestamptzParser } from "./timestamp.js";
import type { Db, QueryResult, TransactionOptions, Tx } from "./types.js";
import { assertSchemaName } from "./types.js";

const log = logger("lib:db");

// int8 as a JS number, as the embedded adapter returns it: ours stay below 2^53, and more is refused.
const INT8_OID = 20;
function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`int8 value ${text} exceeds 2^53-1`);
  return value;
}
const TIMESTAMPTZ_OID = 1184;
const parseTimestamptz = createTimestamptzParser(pg.types.getTypeParser(TIMESTAMPTZ_OID, "text"));
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (format !== "binary") {
      if (oid === INT8_OID) return parseInt8;
      if (oid === TIMESTAMPTZ_OID) return parseTimestamptz;
    }
    return pg.types.getTypeParser(oid, format);
  },
};

export type PgOptions = {
  url: string;
  schema: string;
  poolMax?: number;
  applicationName?: string;
  /** PEM: TLS, the server's certificate checked against it and its host name (unless the URL sets sslmode). */
  ca?: string;
};

/** A Db on a pg pool of its own. The pool's idle-client errors are logged, never thrown. */
export function createPgDb(options: PgOptions): Db {
  const schema = assertSchemaName(options.schema);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolMax ?? 10,
    // Longer than the slowest poll (the outbox relay's 10 s while it listens): an idle service reuses one
    // connection, where pg's 10 s default closed it just before each poll and the next opened a new backend.
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? schema,
    // Short OLTP only: stale statistics can push a plan past jit_above_cost and compiling outlasts running.
    options: "-c jit=off",
    types,
    // tls.connect checks the chain and the host name: libpq's verify-full.
    ssl: options.ca === undefined ? undefined : { ca: options.ca, rejectUnauthorized: true },
  });
  const unwatch = watchPool(schema, () => ({
    total: pool.totalCount,
    idle: pool.idleCount,
    waiting: pool.waitingCount,
  }));
  // pg emits errors of idle clients on the pool; without a listener they crash the process.
  pool.on("error", (err) => log.warn({ err: err.message, schema }, "idle Postgres client failed"));

  let ended: Promise<void> | undefined;
  const statements = createStatementNames();

  /**
   * Statements with parameters are prepared; those without may be scripts, which only the simple protocol
   * runs. A stale prepared statement is retried under a new name only outside a transaction (it aborts one).
   */
  const run = async <R>(
    on: pg.Pool | pg.PoolClient,
    text: string,
    params: readonly unknown[] | undefined,
    retry: boolean,
  ): Promise<QueryResult<R>> => {
    const values = params as unknown[] | undefined;
    const name = values && values.length > 0 ? statements.nameOf(text) : undefined;
    let res: pg.QueryResult;
    try {
      res = name === undefined ? await on.query(text, values) : await on.query({ name, text, values });
    } catch (err) {
      if (name === undefined || !isStalePreparedStatement(err)) throw err;
      statements.forget(text);
      if (!retry) throw err;
      return run(on, text, params, false);
    }
    return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 };
  };
  const query = <R>(text: string, params?: readonly unknown[]) => run<R>(pool, text, params, true);

  return {
    schema,
    query,
    async transaction<T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T> {
      const client = await pool.connect();
      // A checked-out client has no pool listener: unheard, a lost connection's error crashes the process.
      // pg fails the transaction's statements with a connection-loss error anyway.
      let lost: Error | undefined;
      const onLost = (err: Error) => {
        lost ??= err;
        log.warn({ err: err.message, schema }, "Postgres connection lost in a transaction");
      };
      client.on("error", onLost);
      const afterCommit: (() => void)[] = [];
      let broken = false;
      try {
        await client.query("BEGIN");
        const tx: Tx = {
          query: <R>(text: string, params?: readonly unknown[]) => run<R>(client, text, params, false),
          onCommit: (hook) => afterCommit.push(hook),
          async exec(sql) {
            await client.query(sql);
          },
          trace: options?.trace,
        };
        const result = await fn(tx);
        await client.query("COMMIT");
        for (const hook of afterCommit) runHook(hook);
        return result;
      } catch (err) {
        if (lost) broken = true;
        else {
          try {
            await client.query("ROLLBACK");
          } catch {
            broken = true;
          }
        }
        throw err;
      } finally {
        client.off("error", onLost);
        // Lost, or its ROLLBACK failed: in an unknown state, so destroyed, not reused.
        client.release(broken || lost !== undefined);
      }
    },
    async listen(channel, onNotify, onLost) {
      const client = await pool.connect();
      const handler = (msg: pg.Notification) => {
        if (msg.channel === channel) onNotify(msg.payload ?? "");
      };
      // Without this a dropped connection crashes the process (a second error too); the listener hears of the first.
      let lost = false;
      client.on("error", (err) => {
        if (lost) return;
        lost = true;
        log.warn({ err: err.message, channel }, "LISTEN connection lost");
        onLost?.(err);
      });
      client.on("notification", handler);
      try {
        await client.query(`LISTEN "${assertSchemaName(channel)}"`);
      } catch (err) {
        client.release(true);
        throw err;
      }
      return async () => {
        client.off("notification", handler);
        if (lost) return client.release(true);
        try {
          await client.query(`UNLISTEN "${channel}"`);
          client.release();
        } catch {
          client.release(true);
        }
      };
    },
    // Idempotent: a service closes its own Db and the platform closes what is left.
    close: () => {
      unwatch();
      ended ??= pool.end();
      return ended;
    },
  };
}

function runHook(hook: () => void): void {
  try {
    hook();
  } catch (err) {
    log.error({ err }, "onCommit hook failed");
  }
}

export { runHook };
