import { Code, ConnectError } from "@connectrpc/connect";
import type { ErrorCode } from "../lib/errors.js";
import { type Problem, problem } from "../lib/problem.js";
import { contractCodeOf } from "../lib/rpc/errors.js";

/** A failure and the exit code it ends the process with: 2 for usage errors, 1 otherwise. */
export type Failure = { problem: Problem; exitCode: 1 | 2 };

/** What the error mapping needs to know about the attempted call, for its details. */
export type CallContext = { command: string; baseUrl: string };

/**
 * A failure found by replayctl itself rather than answered by a service. Usage errors (bad or
 * missing flags, unknown commands) exit 2 so scripts can tell them from refusals.
 */
export class CliError extends Error {
  override name = "CliError";
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(detail);
  }
}

/** A bad command line: INVALID_ARGUMENT, exit 2. */
export function usageError(detail: string): CliError {
  return new CliError("INVALID_ARGUMENT", detail, 2);
}

// Node reports an unreachable or dropped peer with these; connect-node maps only some of them to
// Unavailable (ECONNRESET becomes Aborted, EHOSTUNREACH Internal), so the cause chain is checked too.
const networkErrorCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "ERR_HTTP2_ERROR",
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_GOAWAY_SESSION",
]);

function hasNetworkCause(err: unknown): boolean {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 8; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && networkErrorCodes.has(code)) return true;
    cause = cause.cause;
  }
  return false;
}

// A ConnectError without our ErrorDetail came from the protocol layer, not from a service's rules;
// these are the contract codes closest to each Connect code.
const fallbackCodes: Partial<Record<Code, ErrorCode>> = {
  [Code.InvalidArgument]: "INVALID_ARGUMENT",
  [Code.NotFound]: "NOT_FOUND",
  [Code.Unauthenticated]: "UNAUTHENTICATED",
  [Code.PermissionDenied]: "PERMISSION_DENIED",
  [Code.ResourceExhausted]: "RATE_LIMITED",
};

function connectFailure(err: ConnectError, call: CallContext): Failure {
  const contract = contractCodeOf(err);
  if (contract) {
    return { problem: problem(contract.code, err.rawMessage, contract.violations), exitCode: 1 };
  }
  if (err.code === Code.Unimplemented) {
    const detail = `${call.command} is not available yet: its service is not implemented`;
    return { problem: problem("NOT_IMPLEMENTED", detail), exitCode: 1 };
  }
  if (err.code === Code.Unavailable || hasNetworkCause(err)) {
    const detail = `cannot reach the system at REPLAYCTL_URL=${call.baseUrl}: ${err.rawMessage}`;
    return { problem: problem("SERVICE_UNAVAILABLE", detail), exitCode: 1 };
  }
  if (err.code === Code.DeadlineExceeded) {
    const detail = `no answer from REPLAYCTL_URL=${call.baseUrl} in time: ${err.rawMessage}`;
    return { problem: problem("SERVICE_UNAVAILABLE", detail), exitCode: 1 };
  }
  return { problem: problem(fallbackCodes[err.code] ?? "INTERNAL_ERROR", err.rawMessage), exitCode: 1 };
}

/** Maps anything a command can throw to the one problem object replayctl prints. */
export function failureOf(err: unknown, call: CallContext): Failure {
  if (err instanceof CliError) return { problem: problem(err.code, err.detail), exitCode: err.exitCode };
  if (err instanceof ConnectError) return connectFailure(err, call);
  const detail = err instanceof Error ? err.message : String(err);
  return { problem: problem("INTERNAL_ERROR", `replayctl failed: ${detail}`), exitCode: 1 };
}
