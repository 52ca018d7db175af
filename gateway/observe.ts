// What the gateway records of each request: its hop of the trace, the request metric and the
// access log line.
import type { FastifyReply, FastifyRequest } from "fastify";
import { logger } from "../lib/log.js";
import { httpRequests } from "../lib/metrics.js";
import { parseTraceparent, startSpan } from "../lib/trace.js";

export const accessLog = logger("gateway:access");

/** The metrics label of a request: its route pattern, never the path itself (ids would make it unbounded). */
export function routeLabel(req: FastifyRequest): string {
  return req.routeOptions.url ?? "unmatched";
}

/**
 * The request's hop of its trace (the client's traceparent, or a new trace), kept on the request
 * and passed explicitly: its log lines and its RPC carry it. Not an AsyncLocalStorage context,
 * which on Node 20 costs every promise of every request its async hooks (lib/trace.ts).
 */
export function startRequestSpan(req: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  const route = routeLabel(req);
  const span = startSpan(`${req.method} ${route}`, "server", parseTraceparent(req.headers.traceparent), {
    requestId: req.id,
    attributes: { "http.request.method": req.method, "http.route": route },
  });
  req.trace = span.trace;
  req.endSpan = span.end;
  done();
}

/**
 * The kubelet's probes: not requests of the API. Counted, a not-ready gateway's 503s would burn the
 * availability objective and healthy probes would pad the total it is a ratio of.
 */
const PROBES: ReadonlySet<string> = new Set(["/healthz", "/readyz"]);

/** Once the response has gone: the span ends, the request metric (probes aside) and the access log line. */
export async function recordResponse(req: FastifyRequest, reply: FastifyReply): Promise<void> {
  req.endSpan?.(
    { "http.response.status_code": reply.statusCode },
    reply.statusCode >= 500 ? String(reply.statusCode) : undefined,
  );
  const route = routeLabel(req);
  if (!PROBES.has(route)) {
    httpRequests.observe({ route, method: req.method, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  }
  accessLog.info(
    {
      method: req.method,
      route: req.routeOptions.url ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 10) / 10,
      tenant: req.routeCall?.tenantId ?? null,
      requestId: req.id,
      trace_id: req.trace?.traceId,
    },
    "request",
  );
}
