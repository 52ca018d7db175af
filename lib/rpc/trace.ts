import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { startSpan } from "../trace.js";
import { kRequestId, kTrace, kTraceParent } from "./context.js";
import { codeName } from "./metrics.js";

/**
 * Makes each RPC a server handles a hop of its caller's trace (the traceparent of the trusted
 * context; a call that brings none, a recorder's check-in say, starts a trace) and hands it to the
 * handler as a context value (traceOf): the handler passes it to the transactions whose events
 * carry it on, and the other interceptors' lines carry it. Explicitly, not through an
 * AsyncLocalStorage: on Node 20 that costs every promise of the process while a call runs (a sixth
 * of the markers process's CPU per create). Outermost; it sees the Connect code the caller
 * receives, which ends the span when spans are exported.
 */
export const traceInterceptor: Interceptor = (next) => async (req) => {
  const service = req.service.typeName;
  const method = req.method.name;
  const span = startSpan(`${service}/${method}`, "server", req.contextValues.get(kTraceParent), {
    requestId: req.contextValues.get(kRequestId),
    attributes: { "rpc.system": "connect_rpc", "rpc.service": service, "rpc.method": method },
  });
  try {
    req.contextValues.set(kTrace, span.trace);
    const res = await next(req);
    span.end();
    return res;
  } catch (err) {
    const code = codeName(ConnectError.from(err).code);
    span.end({ "rpc.connect_rpc.error_code": code }, code);
    throw err;
  }
};
