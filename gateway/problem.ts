import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import { isConnectionLoss } from "../lib/db/errors.js";
import { DomainError, type ErrorCode, errorCodes } from "../lib/errors.js";
import { type Problem, problem } from "../lib/problem.js";
import { contractCodeOf } from "../lib/rpc/errors.js";

// Fastify's own errors that a client can cause, by their error code.
const fastifyCodes: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ["PAYLOAD_TOO_LARGE", "the request body is larger than 65536 bytes"],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ["INVALID_BODY", "Content-Length does not match the body"],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ["INVALID_BODY", "unsupported content type"],
  FST_ERR_CTP_EMPTY_TYPE: ["INVALID_BODY", "the Content-Type header is empty"],
  FST_ERR_ROUTE_MISSING_CONTENT_TYPE: ["INVALID_BODY", "this method needs a Content-Type"],
  // Fallbacks: rewriteUrl and maxParamLength keep these from happening on any route.
  FST_ERR_BAD_URL: ["NOT_FOUND", "the path does not percent-decode"],
  FST_ERR_MAX_PARAM_LENGTH: ["NOT_FOUND", "a path segment is too long"],
  // The client went away while its body was arriving: nobody reads this answer, nothing failed here.
  ECONNRESET: ["INVALID_BODY", "the request body did not arrive whole"],
  ECONNABORTED: ["INVALID_BODY", "the request body did not arrive whole"],
  ERR_STREAM_PREMATURE_CLOSE: ["INVALID_BODY", "the request body did not arrive whole"],
};

/**
 * The gateway's one mapping from a failure to a problem: a DomainError carries its code; a
 * ConnectError from a service carries an ErrorDetail with the contract code; a service that is
 * unreachable or too slow, or a lost database connection, is SERVICE_UNAVAILABLE; a procedure not built yet is NOT_IMPLEMENTED;
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
  // The gateway's own database (authentication, nonces, the admin API) went away under the request.
  if (isConnectionLoss(err)) return problem("SERVICE_UNAVAILABLE", "the database is unavailable; retry later");
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

/** True for the errors of a client that went away mid-request: logged as such, not as failures. */
export function isClientAbort(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "ECONNABORTED" || code === "ERR_STREAM_PREMATURE_CLOSE";
}

/** Retry-After on a 503 SERVICE_UNAVAILABLE: a replica restarts, or the pool reconnects, within seconds. */
const SERVICE_UNAVAILABLE_RETRY_AFTER_S = "1";

/** A problem as the answer to `req`, with its request id as the instance. */
export function sendProblem(req: FastifyRequest, reply: FastifyReply, body: Problem) {
  // A backend or the database away for a moment (a restart, a failover): the client may retry soon.
  if (body.code === "SERVICE_UNAVAILABLE") reply.header("retry-after", SERVICE_UNAVAILABLE_RETRY_AFTER_S);
  return reply
    .header("x-request-id", req.id)
    .code(body.status)
    .type("application/problem+json")
    .send(JSON.stringify({ ...body, instance: req.id }));
}
