import { Code, ConnectError } from "@connectrpc/connect";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import { GRPC_ACCEPT_ENCODING } from "./compression.js";
import { readGrpcMessage } from "./grpc-frame.js";
import { decodeMessage, grpcFrame, grpcStatus } from "./grpc-unary.js";
import { type HttpRequest, type HttpResponse, headerObject, headerValue, isAnswerable } from "./http-exchange.js";
import { type CallOutcome, callOf, type LeanOptions, runUnaryCall } from "./unary-call.js";
import type { UnaryRoute } from "./unary-routes.js";

export function isLeanGrpcWeb(req: HttpRequest): boolean {
  const type = req.headers["content-type"];
  if (type !== "application/grpc-web" && type !== "application/grpc-web+proto") return false;
  const encoding = req.headers["grpc-encoding"];
  return encoding === undefined || encoding === "identity";
}

const TRAILER_FLAG = 0x80;

/** Bytes that are not one message of the input type are `invalid_argument`, as in the other protocols. */
export async function serveGrpcWebUnary(
  route: UnaryRoute,
  req: HttpRequest,
  res: HttpResponse,
  options: LeanOptions,
): Promise<void> {
  const timeout = parseTimeout(headerValue(req.headers["grpc-timeout"]) ?? null, Number.MAX_SAFE_INTEGER);
  if (timeout.error) return answer(res, { ok: false, error: timeout.error });
  let message: Parameters<typeof runUnaryCall>[1];
  try {
    message = decodeMessage(route, await readGrpcMessage(req, options.readMaxBytes));
  } catch (err) {
    return answer(res, { ok: false, error: ConnectError.from(err) });
  }
  const outcome = await runUnaryCall(
    callOf(route, "grpc", req, res, timeout.timeoutMs, options),
    message,
    options.interceptors,
  );
  answer(res, outcome);
}

function answer(res: HttpResponse, outcome: CallOutcome): void {
  if (!isAnswerable(res)) return;
  const trailer = headerObject({}, outcome.trailer);
  let frames: Buffer[] = [];
  if (outcome.ok) {
    try {
      frames = [grpcFrame(0, outcome.binary())];
      trailer["grpc-status"] = "0";
    } catch (err) {
      headerObject(trailer, grpcStatus(ConnectError.from(err, Code.Internal)));
    }
  } else {
    headerObject(trailer, outcome.error.metadata);
    headerObject(trailer, grpcStatus(outcome.error));
  }
  const lines = Object.entries(trailer)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  frames.push(grpcFrame(TRAILER_FLAG, Buffer.from(lines)));
  const body = Buffer.concat(frames);
  const headers = headerObject({}, outcome.header);
  headers["content-type"] = "application/grpc-web+proto";
  headers["grpc-accept-encoding"] = GRPC_ACCEPT_ENCODING;
  headers["content-length"] = String(body.length);
  res.writeHead(200, headers);
  res.end(body);
}
