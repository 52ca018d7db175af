import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { logger } from "../log.js";
import { metricsText, rpcCalls } from "../metrics.js";
import { traceLogFields } from "../trace.js";
import { kTrace } from "./context.js";
import type { HttpRequest, HttpResponse } from "./http-exchange.js";

const log = logger("lib:rpc:server");

/** A closed set, "ok" for success. */
const codeNames = new Map<Code, string>(
  Object.entries(Code)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [value as Code, name.replace(/[a-z](?=[A-Z])/g, "$&_").toLowerCase()]),
);

export function codeName(code: Code): string {
  return codeNames.get(code) ?? "unknown";
}

/** Outside the error interceptor, so a DomainError counts under the Connect code the caller receives. */
export const metricsInterceptor: Interceptor = (next) => async (req) => {
  const started = performance.now();
  const labels = { service: req.service.typeName, method: req.method.name, code: "ok" };
  try {
    return await next(req);
  } catch (err) {
    labels.code = codeName(ConnectError.from(err).code);
    throw err;
  } finally {
    const seconds = (performance.now() - started) / 1000;
    rpcCalls.observe(labels, seconds);
    if (log.isLevelEnabled("debug"))
      log.debug(
        { ...labels, durationMs: Math.round(seconds * 10_000) / 10, ...traceLogFields(req.contextValues.get(kTrace)) },
        "rpc",
      );
  }
};

export function isMetricsScrape(req: HttpRequest): boolean {
  return req.method === "GET" && (req.url === "/metrics" || req.url?.startsWith("/metrics?") === true);
}

export async function serveMetrics(res: HttpResponse): Promise<void> {
  try {
    const { contentType, body } = await metricsText();
    res.writeHead(200, { "content-type": contentType }).end(body);
  } catch {
    res.writeHead(500, { "content-type": "text/plain" }).end("metrics are not available\n");
  }
}
