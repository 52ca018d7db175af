import type { TraceContext } from "../trace.js";

/** What a query returns: rows, and how many rows the statement touched. */
export type QueryResult<R> = { rows: R[]; rowCount: number };

/** Anything that runs parameterised SQL: the pool itself, or one transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** A transaction in progress; `onCommit` work runs only after COMMIT succeeded. */
export interface Tx extends Queryable {
  onCommit(fn: () => void): void;
  /** The hop this transaction works for (TransactionOptions): what its outbox writes hand on. */
  readonly trace?: TraceContext | undefined;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/**
 * One service's access to Postgres. Every statement names its schema-qualified tables itself, so
 * the same interface serves a pg pool and the embedded database shared by all five services.
 */
export interface Db extends Queryable {
  readonly schema: string;
  transaction<T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** LISTENs on a channel; resolves to a function that stops listening. */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export type TransactionOptions = {
  /**
   * The hop of a trace the transaction works for (an RPC's, lib/rpc/context.ts traceOf): the events
   * it enqueues carry it on to their consumers (lib/trace.ts).
   */
  trace?: TraceContext | undefined;
};

/** A schema name safe to put into SQL text: lower-case letters and underscores only. */
export function assertSchemaName(schema: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  return schema;
}
