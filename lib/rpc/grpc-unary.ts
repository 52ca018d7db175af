import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { decodeBinary } from "./binary-decoder.js";
import { GRPC_ACCEPT_ENCODING } from "./compression.js";
import { PREFIX_BYTES, readGrpcMessage } from "./grpc-frame.js";
import { headerObject, headerValue } from "./http-exchange.js";
import { type CallOutcome, callOf, type LeanOptions, runUnaryCall } from "./unary-call.js";
import type { UnaryRoute } from "./unary-routes.js";

export function isLeanGrpc(headers: IncomingHttpHeaders): boolean {
  if (headers[":method"] !== "POST") return false;
  const type = headers["content-type"];
  if (type !== "application/grpc" && type !== "application/grpc+proto") return false;
  const encoding = headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity";
}

/**
 * Bytes that are not exactly one message of the input type are `invalid_argument`, never `internal`. On the
 * HTTP/2 stream itself: the compatibility layer's objects cost more than the rest of the call.
 */
export async function serveGrpcUnary(
  route: UnaryRoute,
  stream: ServerHttp2Stream,
  headers: IncomingHttpHeaders,
  options: LeanOptions,
): Promise<void> {
  const timeout = parseTimeout(headerValue(headers["grpc-timeout"]) ?? null, Number.MAX_SAFE_INTEGER);
  if (timeout.error) return answer(stream, { ok: false, error: timeout.error });
  let message: Parameters<typeof runUnaryCall>[1];
  try {
    message = decodeMessage(route, await readGrpcMessage(stream, options.readMaxBytes));
  } catch (err) {
    return answer(stream, { ok: false, error: ConnectError.from(err) });
  }
  const call = callOf(route, "grpc", { url: headers[":path"], headers }, stream, timeout.timeoutMs, options);
  const outcome = await runUnaryCall(call, message, options.interceptors);
  answer(stream, outcome);
}

/** Or invalid_argument. */
export function decodeMessage(route: UnaryRoute, bytes: Buffer) {
  try {
    return decodeBinary(route.method.input, bytes);
  } catch (err) {
    throw new ConnectError(`parse binary: ${err instanceof Error ? err.message : err}`, Code.InvalidArgument);
  }
}

function answer(stream: ServerHttp2Stream, outcome: CallOutcome): void {
  if (stream.headersSent || stream.destroyed) return;
  const headers = headerObject(
    { "content-type": "application/grpc", "grpc-accept-encoding": GRPC_ACCEPT_ENCODING },
    outcome.header,
  );
  if (!outcome.ok) {
    // Trailers-only: the status travels in the one HEADERS frame that ends the stream.
    headerObject(headers, outcome.error.metadata);
    headerObject(headers, outcome.trailer);
    headerObject(headers, grpcStatus(outcome.error));
    headers["content-type"] = "application/grpc";
    stream.respond({ ":status": 200, ...headers }, { endStream: true });
    // Answered before the caller finished sending: RST_STREAM(NO_ERROR) asks it to stop (RFC 9113 §8.1).
    if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR);
    return;
  }
  let bytes: Uint8Array;
  try {
    bytes = outcome.binary();
  } catch (err) {
    answer(stream, { ok: false, error: ConnectError.from(err, Code.Internal) });
    return;
  }
  const frame = grpcFrame(0, bytes);
  const trailer = outcome.trailer;
  stream.once("wantTrailers", () => stream.sendTrailers(headerObject({ "grpc-status": "0" }, trailer)));
  stream.respond({ ":status": 200, ...headers }, { waitForTrailers: true });
  stream.end(frame);
}

/** Flags: 0 a message, 0x80 gRPC-Web trailers. */
export function grpcFrame(flags: number, bytes: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + bytes.byteLength);
  frame[0] = flags;
  frame.writeUInt32BE(bytes.byteLength, 1);
  frame.set(bytes, PREFIX_BYTES);
  return frame;
}

/** grpc-message encoded as the gRPC spec says: connect's encodeURIComponent makes grpc-js show "+" as "%2B". */
export function grpcStatus(error: ConnectError): Headers {
  const status = setTrailerStatus(new Headers(), error);
  status.set("grpc-message", percentEncode(error.rawMessage));
  return status;
}

export function percentEncode(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
