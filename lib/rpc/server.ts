// Every internal port (what each protocol takes where: docs/grpc-port.md). Each request is answered by exactly
// one of the lean path and connect-node: the lean path answers whatever it took. The lean gRPC-Web path is no
// duplicate: connect-node answers a body that is not the method's input with another status than
// invalid_argument (lib/rpc/lean.test.ts).
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
  /** Loopback, whatever it bound. */
  readonly url: string;
  readonly boundUrl: string;
  /** Stops accepting, lets in-flight RPCs finish for up to `graceMs`, then cuts what is left. */
  close(graceMs?: number): Promise<void>;
};

export type RpcServerOptions = {
  routes: (router: ConnectRouter) => void;
  port: number;
  host?: string;
  /**
   * Run inside the built-in ones. On the lean path requests' and responses' fields are prototype getters
   * (unary-call.ts): an interceptor that answers a copy names them, `{ ...res, message: res.message }`.
   */
  interceptors?: Interceptor[];
  name: string;
  /** When any is set, a call with none of them is refused before any handler. */
  acceptedTokens?: readonly string[];
  /** Cheap. When given, the port serves grpc.health.v1.Health for every service `routes` registered. */
  isReady?: () => Promise<boolean>;
};

/**
 * Serves Connect, gRPC and gRPC-Web on one port. Every handler runs behind the error interceptor and sees
 * the trusted context; GET /metrics is behind the internal token like every call.
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
    // gzip is accepted from stock gRPC clients (served by connect-node), never asked for inside the
    // cluster: there it costs more CPU than the bytes it saves.
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

/** Requests to services are small; anything larger is a bug or abuse. Also bounds what gzip inflates to. */
const READ_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Non-UTF-8 JSON is invalid_argument as on the lean path, not U+FFFD; a leading U+FEFF is kept (and fails)
 * on both alike. Connect reads `textDecoder` though its option type does not name it.
 */
const STRICT_JSON: { ignoreUnknownFields: boolean } = Object.assign(
  { ignoreUnknownFields: true },
  { textDecoder: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }) },
);

/**
 * Resets with NO_ERROR (RFC 9113 §8.1) a stream the caller still sends on once answered (say, refused by its
 * length prefix), or it stays open. Only after the trailers are on the wire: a reset overtakes queued trailers.
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

/** A caller that does not read even this long keeps its stream, for the connection's limits to cut. */
const RESET_TURNS = 20;

function servedServices(router: ConnectRouter): string[] {
  return [...new Set([...router.handlers.map((handler) => handler.service.typeName), Health.typeName])];
}
