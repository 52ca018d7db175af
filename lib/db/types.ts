import type { TraceContext } from "../trace.js";

export type QueryResult<R> = { rows: R[]; rowCount: number };

/** The pool itself, or one transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>>;
}

/** A transaction in progress; `onCommit` work runs only after COMMIT succeeded. */
export interface Tx extends Queryable {
  onCommit(fn: () => void): void;
  readonly trace?: TraceContext | undefined;
  /** A script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/** Statements schema-qualify their tables, so one interface serves a pg pool and the shared embedded database. */
export interface Db extends Queryable {
  readonly schema: string;
  transaction<T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * Resolves to a function that stops listening. `onLost`: the connection that listened went away (never for the
   * embedded database); nothing more is heard on it, and a caller that wants notifications listens again.
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onLost?: (err: Error) => void,
  ): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export type TransactionOptions = {
  /** The events the transaction enqueues carry this hop on to their consumers. */
  trace?: TraceContext | undefined;
};

/** Safe to put into SQL text. */
export function assertSchemaName(schema: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`invalid schema name ${schema}`);
  return schema;
}
