import type { DescService } from "@bufbuild/protobuf";
import { type Client, ConnectError, type ContextValues, type ServiceImpl } from "@connectrpc/connect";
import { contextHeaders, traceOf } from "../lib/rpc/context.js";
import { formatTraceparent } from "../lib/trace.js";

/**
 * Serves a backend service's unary and client-streaming RPCs (RecordingService.UploadArchive) on
 * the gateway's internal port by forwarding each call to the backend, so that operators and
 * recorder tools need one address (REPLAYCTL_URL); a stream's messages are passed on as they
 * arrive. The internal port is trusted (never public), so its callers' context headers are passed
 * on as they are.
 */
export function forwardService<S extends DescService>(service: S, client: Client<S>): ServiceImpl<S> {
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary" && method.methodKind !== "client_streaming") continue;
    const call = (client as Record<string, (req: unknown, options: unknown) => Promise<unknown>>)[method.localName];
    impl[method.localName] = (
      req: unknown,
      ctx: { requestHeader: Headers; signal: AbortSignal; timeoutMs(): number | undefined; values: ContextValues },
    ) => {
      const headers: Record<string, string> = {};
      for (const name of Object.values(contextHeaders)) {
        const value = ctx.requestHeader.get(name);
        if (value !== null) headers[name] = value;
      }
      // The backend's hop is a child of this one.
      const trace = traceOf(ctx);
      if (trace) headers[contextHeaders.traceparent] = formatTraceparent(trace);
      return call?.(req, { headers, signal: ctx.signal, timeoutMs: ctx.timeoutMs() }).catch(rethrowBackendError);
    };
  }
  return impl as ServiceImpl<S>;
}

/**
 * Throws a backend's error on as this handler's own. A ConnectError caught by a client carries the
 * backend's response headers as metadata; thrown on as it is, they would be sent back as this
 * response's headers and trailers (content-type, grpc-status) and break the stream. So only its
 * code, message and details are kept.
 */
export function rethrowBackendError(err: unknown): never {
  if (!(err instanceof ConnectError)) throw err;
  const clean = new ConnectError(err.rawMessage, err.code, undefined, undefined, err);
  clean.details.push(...err.details);
  throw clean;
}
