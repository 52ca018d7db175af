import type { IncomingHttpHeaders } from "node:http";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";
import { headerValue } from "./http-exchange.js";
import { MAX_TIMEOUT_MS } from "./unary-call.js";

/**
 * Removes a deadline header that asks for longer than a timer holds (2^31-1 ms, 24.8 days) from a
 * request bound for connect-node, so that it is served as the lean path serves it: as no deadline.
 * The gRPC spec allows 8 digits of hours (`99999999H`, 11 400 years) and the Connect protocol 10
 * digits of milliseconds (115 days); both are valid, and a call that long has no deadline in
 * practice. connect-node would hand the value to setTimeout, which takes anything past 2^31-1 ms
 * as 1 ms: the call failed with deadline_exceeded at once. A malformed value is left for
 * connect-node to refuse (invalid_argument), as the lean path does.
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
