import { randomFillSync } from "node:crypto";

// W3C Trace Context (https://www.w3.org/TR/trace-context/): one trace id follows a request from the
// gateway through the RPC it makes, the events the service commits to its outbox, the consumers
// that apply them and the webhook deliveries they queue. Each hop is a span of its own (a new span
// id, the trace id kept). A hop is passed explicitly, never through an AsyncLocalStorage (on Node 20
// one in use makes every promise of the process pay for its async hook: a sixth of the markers
// process's CPU per create): the gateway carries it on the request, an RPC handler gets it from its
// context (lib/rpc/context.ts traceOf) and hands it to the transactions whose events carry it on
// (TransactionOptions), a consumer hands each event's hop to its handler's transaction and to its
// prepare, and log lines made for a hop add traceLogFields.

/** One hop of a trace, and the request id of the request it serves, when it serves one. */
export type TraceContext = {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  readonly requestId?: string;
};

/** The header on RPCs, in outbox rows and on bus messages. */
export const TRACEPARENT = "traceparent";

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
// getrandom syscall each) cost the gateway a large share of a /healthz (docs/performance.md).
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

/** What a log line made for a hop carries: its trace id, and the request id it serves. */
export function traceLogFields(trace: TraceContext | undefined): { trace_id?: string; requestId?: string } {
  if (!trace) return {};
  return trace.requestId ? { trace_id: trace.traceId, requestId: trace.requestId } : { trace_id: trace.traceId };
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
