import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { runInTrace, startSpan } from "../trace.js";
import { kRequestId, kTraceParent } from "./context.js";
import { codeName } from "./metrics.js";

/**
 * Runs each RPC a server handles as a hop of its caller's trace (the traceparent of the trusted
 * context; a call that brings none, a recorder's check-in say, starts a trace), so everything the
 * handler logs or enqueues carries the trace id. Outermost, so the other interceptors' lines do too;
 * it sees the Connect code the caller receives, which ends the span when spans are exported.
 */
export const traceInterceptor: Interceptor = (next) => async (req) => {
  const service = req.service.typeName;
  const method = req.method.name;
  const span = startSpan(`${service}/${method}`, "server", req.contextValues.get(kTraceParent), {
    requestId: req.contextValues.get(kRequestId),
    attributes: { "rpc.system": "connect_rpc", "rpc.service": service, "rpc.method": method },
  });
  try {
    const res = await runInTrace(span.trace, () => next(req));
    span.end();
    return res;
  } catch (err) {
    const code = codeName(ConnectError.from(err).code);
    span.end({ "rpc.connect_rpc.error_code": code }, code);
    throw err;
  }
};
