import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { metricsText, rpcCalls } from "../metrics.js";
import type { HttpRequest, HttpResponse } from "./http-exchange.js";

/** Connect codes as metric labels ("not_found", ...), "ok" for success: a closed set. */
const codeNames = new Map<Code, string>(
  Object.entries(Code)
    .filter(([, value]) => typeof value === "number")
    .map(([name, value]) => [value as Code, name.replace(/[a-z](?=[A-Z])/g, "$&_").toLowerCase()]),
);

/**
 * Counts and times every RPC a server handles, by service, method and code. It runs outside the
 * error interceptor, so a DomainError is counted under the Connect code the caller receives.
 */
export const metricsInterceptor: Interceptor = (next) => async (req) => {
  const started = performance.now();
  const labels = { service: req.service.typeName, method: req.method.name, code: "ok" };
  try {
    return await next(req);
  } catch (err) {
    labels.code = codeNames.get(ConnectError.from(err).code) ?? "unknown";
    throw err;
  } finally {
    rpcCalls.observe(labels, (performance.now() - started) / 1000);
  }
};

/** Whether the request is a scrape of GET /metrics. */
export function isMetricsScrape(req: HttpRequest): boolean {
  return req.method === "GET" && (req.url === "/metrics" || req.url?.startsWith("/metrics?") === true);
}

/** Answers a scrape with the process's metrics. */
export async function serveMetrics(res: HttpResponse): Promise<void> {
  try {
    const { contentType, body } = await metricsText();
    res.writeHead(200, { "content-type": contentType }).end(body);
  } catch {
    res.writeHead(500, { "content-type": "text/plain" }).end("metrics are not available\n");
  }
}
