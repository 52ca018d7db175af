import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { startSpan } from "../trace.js";
import { kRequestId, kTrace, kTraceParent } from "./context.js";
import { codeName } from "./metrics.js";

/**
 * Each RPC a hop of its caller's trace (or a new one), handed to the handler as a context value, not through
 * AsyncLocalStorage (lib/trace.ts). Outermost, so it sees the Connect code the caller receives.
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
