import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { logger } from "../log.js";
import { boundUrl } from "./bound-url.js";
import { readTrustedContext } from "./context.js";
import { errorInterceptor } from "./errors.js";
import { isAdmitted, refuseUnauthenticated } from "./internal-token.js";
import { textGuard } from "./text-guard.js";

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
  interceptors?: Interceptor[];
  name: string;
  /** INTERNAL_TOKEN: when set, a call without it is refused before it reaches any handler. */
  token?: string;
};

/**
 * Serves Connect, gRPC and gRPC-Web on HTTP/2 cleartext (h2c), the way recorder infrastructure
 * (stock gRPC clients) and the gateway (Connect) both reach a service. Every handler runs behind
 * the error interceptor and sees the trusted context (tenant, actor, request id).
 */
export async function createRpcServer(options: RpcServerOptions): Promise<RpcServer> {
  // No shutdownSignal: connect-node links one listener per in-flight call to it (past ten calls,
  // a MaxListenersExceededWarning). Destroying the sessions after the grace period aborts every
  // call's own signal just the same.
  const adapter = connectNodeAdapter({
    routes: options.routes,
    interceptors: [errorInterceptor, textGuard, ...(options.interceptors ?? [])],
    contextValues: readTrustedContext,
    // Requests to services are small; anything larger is a bug or abuse.
    readMaxBytes: 4 * 1024 * 1024,
    // Calls stay inside the cluster, where gzip costs more CPU than the bytes it saves: it was the
    // largest single cost of a servers list in the gateway benchmark (11% and 20% of the two processes).
    acceptCompression: [],
  });
  const token = options.token;
  const handler: typeof adapter = token
    ? (req, res) => {
        if (isAdmitted(req.url, req.headers, token)) return adapter(req, res);
        refuseUnauthenticated(req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
      }
    : adapter;
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  const host = options.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const port = address.port;
  log.info({ service: options.name, address: address.address, port }, "rpc server listening");
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    boundUrl: boundUrl(address),
    async close(graceMs = 10_000) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // GOAWAY: no new streams on open sessions, in-flight ones finish.
      for (const session of sessions) session.close();
      const timer = setTimeout(() => {
        for (const session of sessions) session.destroy();
      }, graceMs);
      timer.unref();
      await closed;
      clearTimeout(timer);
    },
  };
}
