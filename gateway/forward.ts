import type { DescService } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, type ContextValues, type ServiceImpl } from "@connectrpc/connect";
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
      const input =
        method.methodKind === "client_streaming" ? untilCancelled(req as AsyncIterable<unknown>, ctx.signal) : req;
      return call?.(input, { headers, signal: ctx.signal, timeoutMs: ctx.timeoutMs() }).catch((err: unknown) => {
        // A backend that died mid-call resets its streams: Canceled to the client library, though
        // this caller cancelled nothing. The caller learns what it is: a backend away, to retry.
        if (err instanceof ConnectError && err.code === Code.Canceled && !ctx.signal.aborted)
          throw new ConnectError("the backend service went away mid-call; retry", Code.Unavailable);
        return rethrowBackendError(err);
      });
    };
  }
  return impl as ServiceImpl<S>;
}

/**
 * A caller's stream of messages, passed on as they arrive, that fails instead of ending when the
 * caller went away: a gRPC client's cancel half-closes its stream and resets it at once (grpc-js and
 * Node's http2 send END_STREAM, then RST_STREAM), and a clean end forwarded told the backend the
 * stream was complete (a cancelled archive upload finished the replay with half an archive). The
 * end waits one turn of the event loop, for a reset that arrived with it to abort the call's signal;
 * failing the input then aborts the backend call instead of completing it.
 */
async function* untilCancelled<T>(messages: AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T> {
  yield* messages;
  await new Promise((resolve) => setImmediate(resolve));
  if (signal.aborted) throw new ConnectError("the caller cancelled the stream before its end", Code.Canceled);
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
