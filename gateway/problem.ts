import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError, type ErrorCode, errorCodes, type FieldViolation } from "../lib/errors.js";
import { contractCodeOf } from "../lib/rpc/errors.js";

/** An RFC 9457 problem as decisions.md §1 shapes it. */
export type Problem = {
  type: string;
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
  instance?: string;
  errors?: { field: string; code: string; detail: string }[];
};

const titles: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  501: "Not Implemented",
  503: "Service Unavailable",
};

export function problem(code: ErrorCode, detail: string, violations: readonly FieldViolation[] = []): Problem {
  const status = errorCodes[code].status;
  const body: Problem = { type: "about:blank", title: titles[status] ?? "Error", status, code, detail };
  if (violations.length > 0) body.errors = violations.map((v) => ({ field: v.field, code: v.code, detail: v.detail }));
  return body;
}

// Fastify's own errors that a client can cause, by their error code.
const fastifyCodes: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ["PAYLOAD_TOO_LARGE", "the request body is larger than 65536 bytes"],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ["INVALID_BODY", "Content-Length does not match the body"],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ["INVALID_BODY", "unsupported content type"],
};

/**
 * The gateway's one mapping from a failure to a problem: a DomainError carries its code; a
 * ConnectError from a service carries an ErrorDetail with the contract code; a service that is
 * unreachable or too slow is SERVICE_UNAVAILABLE; a procedure not built yet is NOT_IMPLEMENTED;
 * everything else is INTERNAL_ERROR, and no 5xx ever echoes the underlying message.
 */
export function toProblem(err: unknown): Problem {
  if (err instanceof DomainError) return problem(err.code, err.detail, err.violations);
  if (err instanceof ConnectError) {
    const contract = contractCodeOf(err);
    if (contract) {
      const status = errorCodes[contract.code].status;
      return problem(contract.code, status >= 500 ? defaultDetail(contract.code) : err.rawMessage, contract.violations);
    }
    if (err.code === Code.Unimplemented)
      return problem("NOT_IMPLEMENTED", "this route's service is not implemented yet");
    if (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded || err.code === Code.Canceled) {
      return problem("SERVICE_UNAVAILABLE", "a backend service is unavailable; retry later");
    }
    return problem("INTERNAL_ERROR", defaultDetail("INTERNAL_ERROR"));
  }
  const fastifyCode = (err as { code?: unknown } | null)?.code;
  if (typeof fastifyCode === "string" && fastifyCodes[fastifyCode]) {
    const [code, detail] = fastifyCodes[fastifyCode];
    return problem(code, detail);
  }
  return problem("INTERNAL_ERROR", defaultDetail("INTERNAL_ERROR"));
}

function defaultDetail(code: ErrorCode): string {
  return code === "INTERNAL_ERROR"
    ? "an unexpected error occurred; it has been logged"
    : code.toLowerCase().replaceAll("_", " ");
}
