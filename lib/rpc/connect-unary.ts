import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJsonBytes, parseTimeout } from "@connectrpc/connect/protocol-connect";
import { decodeBinary } from "./binary-decoder.js";
import {
  type HttpRequest,
  type HttpResponse,
  headerObject,
  headerValue,
  isAnswerable,
  readBody,
} from "./http-exchange.js";
import { type CallOutcome, callOf, type LeanOptions, runUnaryCall } from "./unary-call.js";
import type { UnaryRoute } from "./unary-routes.js";

export type ConnectFormat = "binary" | "json";

/** Undefined when the lean path does not take it. */
export function connectUnaryFormat(contentType: string | undefined): ConnectFormat | undefined {
  if (contentType === "application/proto") return "binary";
  if (contentType === "application/json" || contentType === "application/json; charset=utf-8") return "json";
  return undefined;
}

/**
 * A body that does not parse as the method's input is `invalid_argument`; connect-node's `internal` would
 * blame the service for the caller's bytes.
 */
export async function serveConnectUnary(
  route: UnaryRoute,
  format: ConnectFormat,
  req: HttpRequest,
  res: HttpResponse,
  options: LeanOptions,
): Promise<void> {
  const timeout = parseTimeout(headerValue(req.headers["connect-timeout-ms"]) ?? null, Number.MAX_SAFE_INTEGER);
  if (timeout.error) return answer(res, format, route, { ok: false, error: timeout.error });
  let message: Parameters<typeof runUnaryCall>[1];
  try {
    const body = await readBody(req, options.readMaxBytes);
    message = parse(route, format, body);
  } catch (err) {
    return answer(res, format, route, { ok: false, error: ConnectError.from(err) });
  }
  const call = callOf(route, "connect", req, res, timeout.timeoutMs, options);
  const outcome = await runUnaryCall(call, message, options.interceptors);
  answer(res, format, route, outcome);
}

/** Non-UTF-8 JSON is invalid_argument (RFC 8259), not U+FFFD; a leading U+FEFF is kept and fails to parse. */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function parse(route: UnaryRoute, format: ConnectFormat, body: Buffer) {
  try {
    if (format === "binary") return decodeBinary(route.method.input, body);
    return fromJson(route.method.input, JSON.parse(UTF8.decode(body)) as JsonValue, { ignoreUnknownFields: true });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new ConnectError(`parse ${format}: ${reason}`, Code.InvalidArgument);
  }
}

function answer(res: HttpResponse, format: ConnectFormat, route: UnaryRoute, outcome: CallOutcome): void {
  if (!isAnswerable(res)) return;
  const headers = headerObject({}, outcome.header);
  headerObject(headers, outcome.trailer, "trailer-");
  if (outcome.ok) {
    let body: Uint8Array;
    try {
      body =
        format === "binary"
          ? outcome.binary()
          : Buffer.from(JSON.stringify(toJson(route.method.output, outcome.message)));
    } catch (err) {
      answer(res, format, route, { ok: false, error: ConnectError.from(err, Code.Internal) });
      return;
    }
    headers["content-type"] = format === "binary" ? "application/proto" : "application/json";
    headers["content-length"] = String(body.byteLength);
    res.writeHead(200, headers);
    res.end(body);
    return;
  }
  headerObject(headers, outcome.error.metadata);
  const body = errorToJsonBytes(outcome.error, {});
  headers["content-type"] = "application/json";
  headers["content-length"] = String(body.byteLength);
  res.writeHead(codeToHttpStatus(outcome.error.code), headers);
  res.end(body);
}
