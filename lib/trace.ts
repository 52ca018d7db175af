import { randomFillSync } from "node:crypto";

// W3C Trace Context: one trace id follows a request through RPCs, outbox events, consumers and webhook
// deliveries, each hop a span. Hops are passed explicitly, never through AsyncLocalStorage, which costs
// every promise of the process (docs/engineering.md, "The trace hop is passed, not ambient").

/** One hop of a trace, and the request id of the request it serves, when it serves one. */
export type TraceContext = {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  readonly requestId?: string;
};

export const TRACEPARENT = "traceparent";

const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** As the spec reads it: version 00 exactly; a later version's first four fields; never ff, zero ids or upper case. */
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

// A pool of random bytes: a randomBytes call (a syscall) per id is costly (docs/performance.md).
const idPool = Buffer.allocUnsafe(4096);
let idPoolOffset = idPool.length;

/** Never `zero`, the spec's invalid all-zero id. */
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

export function traceLogFields(trace: TraceContext | undefined): { trace_id?: string; requestId?: string } {
  if (!trace) return {};
  return trace.requestId ? { trace_id: trace.traceId, requestId: trace.requestId } : { trace_id: trace.traceId };
}

// With OpenTelemetry export off, a span is the hop's trace context and an end that does nothing, and no
// OpenTelemetry module is loaded.

export type SpanKind = "server" | "client" | "producer" | "consumer" | "internal";
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

export type Span = {
  readonly trace: TraceContext;
  /** `failure` (a short message) marks it failed. */
  end(attributes?: SpanAttributes, failure?: string): void;
};

export type SpanExporter = (
  name: string,
  kind: SpanKind,
  parent: TraceContext | undefined,
  attributes: SpanAttributes | undefined,
) => { traceId: string; spanId: string; sampled: boolean; end: Span["end"] };

let exporter: SpanExporter | undefined;

/** Undefined: stop exporting. */
export function exportSpans(next: SpanExporter | undefined): void {
  exporter = next;
}

const notExported: Span["end"] = () => {};

/** The next hop of `parent`'s trace, or a new trace. */
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
