import { hash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Interceptor } from "@connectrpc/connect";
import { percentEncode } from "./grpc-unary.js";
import type { HttpRequest, HttpResponse } from "./http-exchange.js";

/** grpc.health.v1 stays open: it tells nothing but "serving", and Kubernetes' gRPC probes send no headers. */
const HEADER = "authorization";
const OPEN_PREFIX = "/grpc.health.v1.Health/";

export function internalTokenInterceptor(token: string): Interceptor {
  const value = `Bearer ${token}`;
  return (next) => (req) => {
    req.header.set(HEADER, value);
    return next(req);
  };
}

/** The header a stock client (grpc-js metadata, fetch) sends. */
export function internalTokenHeaders(token: string | undefined): Record<string, string> {
  return token === undefined ? {} : { [HEADER]: `Bearer ${token}` };
}

/** Digests compared in constant time, every one of them: neither a token's content nor its length leaks. */
export function isAdmitted(
  path: string | undefined,
  headers: IncomingHttpHeaders,
  accepted: readonly Buffer[],
): boolean {
  if (path?.startsWith(OPEN_PREFIX)) return true;
  const sent = headers[HEADER];
  if (typeof sent !== "string" || !sent.startsWith("Bearer ")) return false;
  const presented = digest(sent.slice(7));
  let admitted = false;
  for (const token of accepted) admitted = timingSafeEqual(presented, token) || admitted;
  return admitted;
}

export function acceptedDigests(tokens: readonly string[]): Buffer[] {
  return tokens.map(digest);
}

/** SHA-256 of the token, one-shot: it runs on every internal call. */
function digest(text: string): Buffer {
  return hash("sha256", text, "buffer");
}

const MESSAGE = "this internal endpoint needs the internal token (authorization: Bearer <INTERNAL_TOKEN>)";

/** UNAUTHENTICATED in the caller's own protocol, before any RPC machinery runs. */
export function refuseUnauthenticated(req: HttpRequest, res: HttpResponse): void {
  const contentType = req.headers["content-type"] ?? "";
  // The request body is not wanted; let the stream end without reading it.
  req.resume();
  if (contentType.startsWith("application/grpc")) {
    const status = {
      "content-type": contentType.split(";")[0] as string,
      "grpc-status": "16",
      "grpc-message": percentEncode(MESSAGE),
    };
    // HTTP/2: trailers-only, the status in the one HEADERS frame that ends the stream.
    if ("stream" in res) res.stream.respond({ ":status": 200, ...status }, { endStream: true });
    else res.writeHead(200, status).end();
    return;
  }
  res.writeHead(401, { "content-type": "application/json" });
  res.end(JSON.stringify({ code: "unauthenticated", message: MESSAGE }));
}
