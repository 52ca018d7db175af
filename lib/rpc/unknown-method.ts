import { constants, type Http2ServerResponse } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { grpcStatus } from "./grpc-unary.js";
import { type HttpRequest, type HttpResponse, headerObject, headerValue } from "./http-exchange.js";

/** Enough to tell a typo, never a caller's whole header back. */
const PATH_SHOWN = 200;

/**
 * gRPC and gRPC-Web get a trailers-only UNIMPLEMENTED: to C-core a 404 is a transport failure, not an answer.
 * Connect, and anything else, keeps HTTP 404.
 */
export function answerUnknownMethod(req: HttpRequest, res: HttpResponse): void {
  const type = headerValue(req.headers["content-type"]) ?? "";
  if (!type.startsWith("application/grpc")) {
    res.writeHead(404);
    res.end();
    return;
  }
  const path = (req.url ?? "").slice(0, PATH_SHOWN);
  const status = grpcStatus(new ConnectError(`no method ${path} is served on this port`, Code.Unimplemented));
  const headers = headerObject(
    { "content-type": type.startsWith("application/grpc-web") ? "application/grpc-web+proto" : "application/grpc" },
    status,
  );
  // Read and dropped, so the caller is not left blocked on it.
  req.resume();
  if ("stream" in res) {
    const stream = (res as Http2ServerResponse).stream;
    stream.respond({ ":status": 200, ...headers }, { endStream: true });
    // A caller still sending is asked to stop (RFC 9113 §8.1), as on the lean gRPC path.
    if (!req.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR);
    return;
  }
  res.writeHead(200, headers);
  res.end();
}
