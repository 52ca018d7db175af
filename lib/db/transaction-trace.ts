import { formatTraceparent, type TraceContext } from "../trace.js";
import type { Tx } from "./types.js";

/**
 * `tx` working for another hop: the same transaction, whose outbox writes carry `trace` (a
 * consumer's group transaction applies each event for the event's own hop).
 */
export function withTrace(tx: Tx, trace: TraceContext): Tx {
  return {
    query: (text, params) => tx.query(text, params),
    onCommit: (fn) => tx.onCommit(fn),
    exec: (sql) => tx.exec(sql),
    trace,
  };
}

/** The traceparent what `tx` enqueues hands on: the hop it works for, if any. */
export function traceparentOf(tx: Tx): string | undefined {
  return tx.trace ? formatTraceparent(tx.trace) : undefined;
}
