// Which port serves which protocol on which path, and by which code: the one place this is written.
//
// The public port (PORT, gateway/app.ts, Fastify, HTTP/1.1 only): the REST API of the route table
// (gateway/routes/table.ts: /v1/api/*, /v1/replays*, /v1/webhooks*, each route naming its
// authentication, API key or signature), /healthz, /readyz, /openapi.json and /docs. No RPC
// protocol is served there.
//
// Every internal port is one createRpcServer (below): the gateway's INTERNAL_PORT (the identity
// admin service, and every service forwarded to its own port by gateway/forward.ts, so replayctl
// and recorders need one address), and each service's own port (PORT in the distributed mode,
// MARKERS_PORT ... WEBHOOKS_PORT on 127.0.0.1 in the embedded one). Each serves, over HTTP/1.1 and
// h2c alike (listener.ts tells them apart by the first bytes), on /<package.Service>/<Method>:
//
// | protocol | taken by the lean path (lean-handler.ts)                   | left to connect-node (same handlers)    |
// | -------- | ---------------------------------------------------------- | --------------------------------------- |
// | Connect  | unary POST, proto or JSON, uncompressed (connect-unary.ts) | GET, streams, compressed bodies         |
// | gRPC     | unary on an h2c stream, uncompressed (grpc-unary.ts)       | streams, compressed, +json              |
// | gRPC-Web | unary, binary, uncompressed (grpc-web-unary.ts)            | the -text variants, compressed, streams |
//
// Each request is answered by exactly one of the two: the lean path answers whether it took it, and
// connect-node gets only what it did not. Before both: the internal token (internal-token.ts; an
// open grpc.health.v1.Health, registered here when isReady is given) and GET /metrics
// (metrics.ts). A path that names no method: unknown-method.ts (UNIMPLEMENTED in gRPC and gRPC-Web,
// 404 in Connect). The lean gRPC-Web path is no duplicate of connect-node's: on a body that is not
// the method's input connect-node answers another status than invalid_argument, which every
// protocol answers (lib/rpc/lean.test.ts). What a port accepts in detail: docs/grpc-port.md.
import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { logger } from "../log.js";
import { boundUrl } from "./bound-url.js";
import { ACCEPT_COMPRESSION, COMPRESS_MIN_BYTES } from "./compression.js";
import { readTrustedContext } from "./context.js";
import { dropUnboundedDeadline } from "./deadline.js";
import { errorInterceptor } from "./errors.js";
import { createHealthService } from "./health.js";
import type { HttpRequest, HttpResponse } from "./http-exchange.js";
import { acceptedDigests, isAdmitted, refuseUnauthenticated } from "./internal-token.js";
import { createLeanHandler, createLeanStreamHandler } from "./lean-handler.js";
import { createDualListener } from "./listener.js";
import { isMetricsScrape, metricsInterceptor, serveMetrics } from "./metrics.js";
import { keepByteOrderMarks } from "./text-encoding.js";
import { textGuard } from "./text-guard.js";
import { traceInterceptor } from "./trace.js";
import { collectUnaryRoutes, type UnaryRoute } from "./unary-routes.js";
import { answerUnknownMethod } from "./unknown-method.js";

const log = logger("lib:rpc:server");

export type RpcServer = {
  readonly port: number;
  /** Where to call it from this machine (loopback, whatever it bound). */
  readonly url: string;
  /** The address it really bound. */
  readonly boundUrl: string;
  /** Stops accepting, lets in-flight RPCs finish for up to `graceMs`, then cuts what is left. */
  close(graceMs?: number): Promise<void>;
};

export type RpcServerOptions = {
  routes: (router: ConnectRouter) => void;
  port: number;
  host?: string;
  /**
   * Run inside the built-in ones. On the lean path a unary request's `signal` and `header` and a
   * response's `header`, `trailer` and `message` are prototype getters (unary-call.ts says why): an
   * interceptor that answers a copy names them, `{ ...res, message: res.message }`.
   */
  interceptors?: Interceptor[];
  name: string;
  /**
   * INTERNAL_TOKEN (and during a rotation INTERNAL_TOKEN_ACCEPTED): when any is set, a call with
   * none of them is refused before it reaches any handler.
   */
  acceptedTokens?: readonly string[];
  /**
   * Whether the process can serve (its database, its bus; cheap). When given, the port serves
   * grpc.health.v1.Health, which knows every service `routes` registered (and itself): what a
   * probe may ask for is what the port serves, kept by no list of names.
   */
  isReady?: () => Promise<boolean>;
};

/**
 * Serves Connect, gRPC and gRPC-Web on one port (the table at the top of this file): the gateway
 * and replayctl call it in the Connect protocol over HTTP/1.1 keep-alive, recorder infrastructure
 * with stock gRPC clients over h2c. Every handler runs behind the error interceptor and sees the
 * trusted context (tenant, actor, request id). GET /metrics answers the process's metrics
 * (lib/metrics.ts), behind the internal token like every call.
 */
export async function createRpcServer(options: RpcServerOptions): Promise<RpcServer> {
  keepByteOrderMarks();
  const interceptors = [
    traceInterceptor,
    metricsInterceptor,
    errorInterceptor,
    textGuard,
    ...(options.interceptors ?? []),
  ];
  let unaryRoutes: ReadonlyMap<string, UnaryRoute> = new Map();
  // No shutdownSignal: connect-node links one listener per in-flight call to it (past ten calls,
  // a MaxListenersExceededWarning). Destroying the connections after the grace period aborts every
  // call's own signal just the same.
  const adapter = connectNodeAdapter({
    routes: (router) => {
      unaryRoutes = collectUnaryRoutes(router, (registering) => {
        options.routes(registering);
        if (options.isReady) registering.service(Health, createHealthService(servedServices(router), options.isReady));
      });
    },
    interceptors,
    contextValues: readTrustedContext,
    readMaxBytes: READ_MAX_BYTES,
    jsonOptions: STRICT_JSON,
    // gzip is accepted (a stock gRPC client may send it; compression.ts bounds what it inflates to)
    // but never asked for inside the cluster: the gateway's hop sends and accepts none, since gzip
    // there costs more CPU than the bytes it saves (it was the largest single cost of a servers
    // list in the gateway benchmark: docs/performance.md). Compressed calls are
    // served here, by connect-node; the lean path takes only uncompressed ones.
    acceptCompression: ACCEPT_COMPRESSION,
    compressMinBytes: COMPRESS_MIN_BYTES,
    fallback: (req, res) => answerUnknownMethod(req, res as HttpResponse),
  });
  const leanOptions = { interceptors, contextValues: readTrustedContext, readMaxBytes: READ_MAX_BYTES };
  const lean = createLeanHandler(unaryRoutes, leanOptions);
  const leanStream = createLeanStreamHandler(unaryRoutes, leanOptions);
  const accepted = acceptedDigests(options.acceptedTokens ?? []);
  const guarded = accepted.length > 0;
  const handle = (req: HttpRequest, res: HttpResponse) => {
    if (guarded && !isAdmitted(req.url, req.headers, accepted)) return refuseUnauthenticated(req, res);
    if (isMetricsScrape(req)) return void serveMetrics(res);
    if (lean(req, res)) return;
    dropUnboundedDeadline(req.headers);
    endStreamWhenAnswered(req, res);
    void adapter(req as never, res as never);
  };
  // A stream without the token is left to `handle`, which refuses it.
  const handleStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) =>
    (!guarded || isAdmitted(headers[":path"], headers, accepted)) && leanStream(stream, headers);
  const listener = createDualListener(handle, handleStream);
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    listener.server.once("error", reject);
    listener.server.listen(options.port, host, () => {
      listener.server.off("error", reject);
      resolve();
    });
  });
  const address = listener.server.address() as AddressInfo;
  const port = address.port;
  log.info({ service: options.name, address: address.address, port }, "rpc server listening");
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    boundUrl: boundUrl(address),
    close: (graceMs = 10_000) => listener.close(graceMs),
  };
}

/** Requests to services are small; anything larger is a bug or abuse. Also the bound on what a compressed message inflates to. */
const READ_MAX_BYTES = 4 * 1024 * 1024;

/**
 * JSON bodies decoded strictly: bytes that are not UTF-8 are invalid_argument, as on the lean path
 * (connect-unary.ts), not text with U+FFFD in place of what the caller sent. A leading U+FEFF is
 * kept (and then fails to parse as JSON) on both paths alike. `textDecoder` is read by
 * connect's JSON serialization though its option type does not name it.
 */
const STRICT_JSON: { ignoreUnknownFields: boolean } = Object.assign(
  { ignoreUnknownFields: true },
  { textDecoder: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }) },
);

/**
 * On HTTP/2, once connect-node's answer is complete, resets a request stream the caller is still
 * sending on with NO_ERROR, which asks it to stop (RFC 9113 §8.1), as the lean gRPC path does: a
 * message refused by its length prefix (4 GiB) is answered at once, and the stream would otherwise
 * stay open as long as the caller keeps it. The reset waits until the trailers are on the wire
 * (the stream's local side closed): sent while they are still queued, it overtook them and the
 * caller got no status. A few turns of the event loop are enough; a caller that does not read
 * even that long keeps its stream, for the connection's own limits to cut.
 */
function endStreamWhenAnswered(req: HttpRequest, res: HttpResponse): void {
  if (!("stream" in res)) return;
  const stream = res.stream;
  let turns = 0;
  const resetOnceSent = () => {
    if (req.readableEnded || stream.closed || stream.destroyed) return;
    if (stream.state.localClose) return void stream.close(constants.NGHTTP2_NO_ERROR);
    if (++turns < RESET_TURNS) setImmediate(resetOnceSent);
  };
  stream.once("wantTrailers", () => setImmediate(resetOnceSent));
}

/** How many turns of the event loop a finished answer's trailers get to reach the wire before the reset is dropped. */
const RESET_TURNS = 20;

/** Every service registered on a router, by its fully-qualified name, and grpc.health.v1.Health itself. */
function servedServices(router: ConnectRouter): string[] {
  return [...new Set([...router.handlers.map((handler) => handler.service.typeName), Health.typeName])];
}
