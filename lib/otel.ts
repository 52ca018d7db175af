import type { Config } from "./config.js";
import { logger } from "./log.js";
import { exportSpans, type SpanKind } from "./trace.js";

const log = logger("lib:otel");

/** Span export while it runs; `stop` sends what is still batched and turns export off. */
export type OtelExport = { stop(): Promise<void> };

/**
 * Without an OTLP endpoint it does nothing and loads no OpenTelemetry module, so a process without a
 * collector pays nothing. Sampling is parent-based; new traces are always sampled.
 */
export async function startOtelExport(config: Config["otel"], serviceName: string): Promise<OtelExport | undefined> {
  if (config.otlpUrl === undefined) return undefined;
  const [api, sdk, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
  ]);
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: config.otlpUrl, headers: { ...config.headers } }),
        scheduledDelayMillis: config.batchDelayMs,
      }),
    ],
  });
  const tracer = provider.getTracer("replay-service");
  const kinds: Record<SpanKind, number> = {
    server: api.SpanKind.SERVER,
    client: api.SpanKind.CLIENT,
    producer: api.SpanKind.PRODUCER,
    consumer: api.SpanKind.CONSUMER,
    internal: api.SpanKind.INTERNAL,
  };
  exportSpans((name, kind, parent, attributes) => {
    const context = parent
      ? api.trace.setSpanContext(api.ROOT_CONTEXT, {
          traceId: parent.traceId,
          spanId: parent.spanId,
          traceFlags: parent.sampled ? api.TraceFlags.SAMPLED : api.TraceFlags.NONE,
          isRemote: true,
        })
      : api.ROOT_CONTEXT;
    const span = tracer.startSpan(name, { kind: kinds[kind], attributes: defined(attributes) }, context);
    const { traceId, spanId, traceFlags } = span.spanContext();
    return {
      traceId,
      spanId,
      sampled: (traceFlags & api.TraceFlags.SAMPLED) !== 0,
      end(endAttributes, failure) {
        if (endAttributes) span.setAttributes(defined(endAttributes));
        if (failure !== undefined) span.setStatus({ code: api.SpanStatusCode.ERROR, message: failure });
        span.end();
      },
    };
  });
  log.info({ url: config.otlpUrl, serviceName }, "exporting spans");
  return {
    async stop() {
      exportSpans(undefined);
      await provider.shutdown().catch((err: unknown) => log.warn({ err }, "sending the last spans failed"));
    },
  };
}

function defined(attributes: Record<string, string | number | boolean | undefined> | undefined) {
  const kept: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(attributes ?? {})) if (value !== undefined) kept[key] = value;
  return kept;
}
