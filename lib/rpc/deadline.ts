import type { IncomingHttpHeaders } from "node:http";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";
import { headerValue } from "./http-exchange.js";
import { MAX_TIMEOUT_MS } from "./unary-call.js";

/**
 * A valid deadline longer than a timer holds (2^31-1 ms) is no deadline, as on the lean path: connect-node's
 * setTimeout would take it as 1 ms and fail the call at once. Malformed ones are left to connect-node.
 */
export function dropUnboundedDeadline(headers: IncomingHttpHeaders): void {
  const grpc = headerValue(headers["grpc-timeout"]);
  if (grpc !== undefined && (parseGrpcTimeout(grpc, Number.MAX_SAFE_INTEGER).timeoutMs ?? 0) > MAX_TIMEOUT_MS) {
    delete headers["grpc-timeout"];
  }
  const connect = headerValue(headers["connect-timeout-ms"]);
  if (
    connect !== undefined &&
    (parseConnectTimeout(connect, Number.MAX_SAFE_INTEGER).timeoutMs ?? 0) > MAX_TIMEOUT_MS
  ) {
    delete headers["connect-timeout-ms"];
  }
}
