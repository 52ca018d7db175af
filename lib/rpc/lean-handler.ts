import type { IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";
import { connectUnaryFormat, serveConnectUnary } from "./connect-unary.js";
import { isLeanGrpc, serveGrpcUnary } from "./grpc-unary.js";
import { isLeanGrpcWeb, serveGrpcWebUnary } from "./grpc-web-unary.js";
import type { HttpRequest, HttpResponse } from "./http-exchange.js";
import type { LeanOptions } from "./unary-call.js";
import type { UnaryRoute } from "./unary-routes.js";

/**
 * Unary calls served straight from the request with the same handlers and interceptors; returns whether it
 * took the request (the rest goes to connect-node: docs/grpc-port.md).
 */
export function createLeanHandler(
  routes: ReadonlyMap<string, UnaryRoute>,
  options: LeanOptions,
): (req: HttpRequest, res: HttpResponse) => boolean {
  return (req, res) => {
    if (req.method !== "POST") return false;
    const route = routes.get(req.url ?? "");
    if (!route) return false;
    const format = connectUnaryFormat(req.headers["content-type"]);
    if (format) {
      const encoding = req.headers["content-encoding"];
      if (encoding !== undefined && encoding !== "identity") return false;
      void serveConnectUnary(route, format, req, res, options);
      return true;
    }
    if (isLeanGrpcWeb(req)) {
      void serveGrpcWebUnary(route, req, res, options);
      return true;
    }
    return false;
  };
}

export function createLeanStreamHandler(
  routes: ReadonlyMap<string, UnaryRoute>,
  options: LeanOptions,
): (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean {
  return (stream, headers) => {
    if (!isLeanGrpc(headers)) return false;
    const route = routes.get(headers[":path"] ?? "");
    if (!route) return false;
    void serveGrpcUnary(route, stream, headers, options);
    return true;
  };
}
