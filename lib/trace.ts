import { AsyncLocalStorage } from "node:async_hooks";
import { randomFillSync } from "node:crypto";

// W3C Trace Context (https://www.w3.org/TR/trace-context/): one trace id follows a request from the
// gateway through the RPC it makes, the events the service commits to its outbox, the consumers
// that apply them and the webhook deliveries they queue. Each hop is a span of its own (a new span
// id, the trace id kept). In the services the current one lives in an AsyncLocalStorage, so every
// log line made within a hop carries its trace id (lib/log.ts) and an outbox write picks it up
// without being told; the gateway's request path carries its hop on the request instead (see
// runInTrace for why).

/** One hop of a trace, and the request id of the request it serves, when it serves one. */
export type TraceContext = {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  readonly requestId?: string;
};

/** The header on RPCs, in outbox rows and on bus messages. */
export const TRACEPARENT = "traceparent";

const storage = new AsyncLocalStorage<TraceContext>();
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * A traceparent header as the spec reads it: version 00 exactly as specified; a later version's
 * first four fields (its format is a superset); never version ff, all-zero ids or upper case.
 */
export function parseTraceparent(header: string | string[] | undefined): TraceContext | undefined {
  if (typeof header !== "string") return undefined;
  const match = TRACEPARENT_PATTERN.exec(header.trim());
  if (!match) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string?,
  ];
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
}

export function formatTraceparent(trace: TraceContext): string {
  return `00-${trace.traceId}-${trace.spanId}-${trace.sampled ? "01" : "00"}`;
}

/** The next hop: a child of `parent` (its trace id, a new span id), or the first hop of a new trace. */
export function nextSpan(parent: TraceContext | undefined, requestId?: string): TraceContext {
  return {
    traceId: parent?.traceId ?? randomHex(16, ZERO_TRACE),
    spanId: randomHex(8, ZERO_SPAN),
    sampled: parent?.sampled ?? true,
    ...(requestId ? { requestId } : {}),
  };
}

// Ids come from a pool of random bytes refilled 4 KiB at a time: a randomBytes call per id (a
// getrandom syscall each) cost the gateway ~6 µs a request, more than a third of a /healthz.
const idPool = Buffer.allocUnsafe(4096);
let idPoolOffset = idPool.length;

/** `bytes` random bytes as hex, never `zero` (the spec's invalid all-zero id). */
function randomHex(bytes: number, zero: string): string {
  for (;;) {
    if (idPoolOffset + bytes > idPool.length) {
      randomFillSync(idPool);
      idPoolOffset = 0;
    }
    const hex = idPool.toString("hex", idPoolOffset, idPoolOffset + bytes);
    idPoolOffset += bytes;
    if (hex !== zero) return hex;
  }
}

/** Hops running now; the storage is turned off when none is, see runInTrace. */
let running = 0;

/**
 * Runs `fn` as this hop: what it logs and enqueues, however deep, carries the trace (until `fn`,
 * or the promise it returns, settles).
 *
 * On Node 20 an AsyncLocalStorage in use makes every promise the process creates cost ~0.13 µs
 * more (its async hook runs for each). So the storage is on only while some hop runs and turned
 * off again when the last one ends: a process whose requests take no hop (the gateway's public
 * path passes its trace explicitly) pays nothing, however many hops an occasional admin call took.
 */
export function runInTrace<T>(trace: TraceContext, fn: () => T): T {
  running++;
  let result: T;
  try {
    result = storage.run(trace, fn);
  } catch (err) {
    leave();
    throw err;
  }
  if (result instanceof Promise) return result.finally(leave) as T;
  leave();
  return result;
}

function leave(): void {
  running--;
  if (running === 0) storage.disable();
}

/** The hop running now, if any. */
export function currentTrace(): TraceContext | undefined {
  return storage.getStore();
}

/** The traceparent of the hop running now, for what it hands on (an RPC, an outbox row). */
export function currentTraceparent(): string | undefined {
  const trace = storage.getStore();
  return trace ? formatTraceparent(trace) : undefined;
}

// Spans. A hop is also a span when OpenTelemetry export is on (OTEL_EXPORTER_OTLP_ENDPOINT,
// lib/otel.ts): the exporter then makes the hop's ids and times and sends it when it ends. When it
// is off, a span is the hop's trace context and an end that does nothing, and no OpenTelemetry
// module is even loaded.

export type SpanKind = "server" | "client" | "producer" | "consumer" | "internal";
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** One hop being timed. */
export type Span = {
  readonly trace: TraceContext;
  /** Ends the hop, with what it came to; `failure` (a short message) marks it failed. */
  end(attributes?: SpanAttributes, failure?: string): void;
};

/** What starts exported spans: the OpenTelemetry tracer, when export is on. */
export type SpanExporter = (
  name: string,
  kind: SpanKind,
  parent: TraceContext | undefined,
  attributes: SpanAttributes | undefined,
) => { traceId: string; spanId: string; sampled: boolean; end: Span["end"] };

let exporter: SpanExporter | undefined;

/** Sends every span started from now on to `next` (undefined: stop exporting). */
export function exportSpans(next: SpanExporter | undefined): void {
  exporter = next;
}

const notExported: Span["end"] = () => {};

/** Starts the next hop of `parent`'s trace (or a new trace) as a span named `name`. */
export function startSpan(
  name: string,
  kind: SpanKind,
  parent: TraceContext | undefined,
  options: { requestId?: string; attributes?: SpanAttributes } = {},
): Span {
  if (!exporter) return { trace: nextSpan(parent, options.requestId), end: notExported };
  const { traceId, spanId, sampled, end } = exporter(name, kind, parent, options.attributes);
  return { trace: { traceId, spanId, sampled, ...(options.requestId ? { requestId: options.requestId } : {}) }, end };
}
