// The contract's error codes (spec/decisions.md §1), so that a caller can switch on a problem's
// `code` exhaustively. The OpenAPI document enumerates each route's codes per status but its shared
// Problem schema types `code` as a string; this list is the union over all routes. The root's
// test/client-package.test.ts fails when it differs from the service's lib/errors.ts.
import type { components } from "./openapi.js";

export const ERROR_CODES = [
  "INVALID_BODY",
  "INVALID_TARGET",
  "INVALID_REPLAY_ID",
  "INVALID_SERVER_ID",
  "INVALID_MARKER_ID",
  "INVALID_CATEGORY_ID",
  "INVALID_TICK",
  "INVALID_LABEL",
  "INVALID_CATEGORY",
  "INVALID_ACTOR",
  "INVALID_COLOUR",
  "INVALID_ICON",
  "INVALID_NAME",
  "INVALID_PAGE_SIZE",
  "INVALID_PAGE_TOKEN",
  "INVALID_IDEMPOTENCY_KEY",
  "INVALID_ARGUMENT",
  "UNAUTHENTICATED",
  "INVALID_API_KEY",
  "MISSING_TENANT",
  "INVALID_SIGNATURE",
  "REQUEST_EXPIRED",
  "NONCE_REUSED",
  "INSUFFICIENT_SCOPE",
  "ACTOR_BINDING_REQUIRED",
  "ACTOR_REMOVED",
  "PERMISSION_DENIED",
  "TARGET_ACCESS_DENIED",
  "NOT_FOUND",
  "REPLAY_NOT_FOUND",
  "NO_ACTIVE_RECORDING",
  "MARKER_NOT_FOUND",
  "SERVER_NOT_FOUND",
  "CATEGORY_NOT_FOUND",
  "SUBSCRIPTION_NOT_FOUND",
  "DELIVERY_NOT_FOUND",
  "TENANT_NOT_FOUND",
  "MEMBER_NOT_FOUND",
  "KEY_NOT_FOUND",
  "METHOD_NOT_ALLOWED",
  "TOO_MANY_MARKERS",
  "DELIVERY_NOT_REPLAYABLE",
  "SERVER_LIMIT_REACHED",
  "INVALID_TRANSITION",
  "RECORDING_IN_PROGRESS",
  "SERVER_NOT_CONNECTED",
  "SERVER_DEAUTHORISED",
  "STORAGE_QUOTA_EXCEEDED",
  "PAYLOAD_TOO_LARGE",
  "VALIDATION_ERROR",
  "IDEMPOTENCY_KEY_REUSED",
  "RATE_LIMITED",
  "INTERNAL_ERROR",
  "NOT_IMPLEMENTED",
  "SERVICE_UNAVAILABLE",
  "WEBHOOK_DELIVERY_UNCONFIGURED",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * A problem+json answer (RFC 9457) as every route gives it, with `code` narrowed to the contract's
 * codes. On REQUEST_EXPIRED the client adds `clock_skew_seconds`: this machine's clock minus the
 * server's, by the answer's Date header (positive when this clock is ahead).
 */
export type Problem = Omit<components["schemas"]["Problem"], "code"> & { code: ErrorCode; clock_skew_seconds?: number };

/** True when the text is one of the contract's error codes. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && (ERROR_CODES as readonly string[]).includes(code);
}

/**
 * The clock skew the client found on a REQUEST_EXPIRED answer, in seconds (this machine's clock
 * minus the server's, by its Date header: positive when this one is ahead); undefined on any other
 * error. Takes a call's `error` as it is typed for its route.
 */
export function clockSkewSeconds(error: unknown): number | undefined {
  const skew = (error as { clock_skew_seconds?: unknown } | null | undefined)?.clock_skew_seconds;
  return typeof skew === "number" ? skew : undefined;
}
