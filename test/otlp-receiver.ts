import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** One span as an OTLP/HTTP JSON export carries it, with its process's `service.name`. */
export type ReceivedSpan = {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
};

export type OtlpReceiver = {
  /** What to set OTEL_EXPORTER_OTLP_ENDPOINT to. */
  endpoint: string;
  spans(): ReceivedSpan[];
  close(): Promise<void>;
};

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };
type ExportRequest = {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: (Omit<ReceivedSpan, "service" | "attributes"> & { attributes?: KeyValue[] })[] }[];
  }[];
};

/**
 * A stand-in OpenTelemetry collector: takes OTLP/HTTP JSON trace exports at POST /v1/traces, as a
 * real collector does, and keeps every span it is sent.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces" || !req.headers["content-type"]?.includes("json")) {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportRequest;
      for (const resource of body.resourceSpans ?? []) {
        const service = String(attributeMap(resource.resource?.attributes)["service.name"]);
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            received.push({ ...span, service, attributes: attributeMap(span.attributes) });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans: () => [...received],
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function attributeMap(attributes: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries(
    (attributes ?? []).map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue)),
    ]),
  );
}
