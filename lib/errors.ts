import { Code } from "@connectrpc/connect";

/** The contract's codes (spec/replay-api.md §Errors): the only place statuses are chosen, both ways. */
export const errorCodes = {
  INVALID_BODY: { status: 400, rpc: Code.InvalidArgument },
  INVALID_TARGET: { status: 400, rpc: Code.InvalidArgument },
  INVALID_REPLAY_ID: { status: 400, rpc: Code.InvalidArgument },
  INVALID_SERVER_ID: { status: 400, rpc: Code.InvalidArgument },
  INVALID_MARKER_ID: { status: 400, rpc: Code.InvalidArgument },
  INVALID_CATEGORY_ID: { status: 400, rpc: Code.InvalidArgument },
  INVALID_TICK: { status: 400, rpc: Code.InvalidArgument },
  INVALID_LABEL: { status: 400, rpc: Code.InvalidArgument },
  INVALID_CATEGORY: { status: 400, rpc: Code.InvalidArgument },
  INVALID_ACTOR: { status: 400, rpc: Code.InvalidArgument },
  INVALID_COLOUR: { status: 400, rpc: Code.InvalidArgument },
  INVALID_ICON: { status: 400, rpc: Code.InvalidArgument },
  INVALID_NAME: { status: 400, rpc: Code.InvalidArgument },
  INVALID_PAGE_SIZE: { status: 400, rpc: Code.InvalidArgument },
  INVALID_PAGE_TOKEN: { status: 400, rpc: Code.InvalidArgument },
  INVALID_IDEMPOTENCY_KEY: { status: 400, rpc: Code.InvalidArgument },
  // Operator (replayctl) input that no public route can send.
  INVALID_ARGUMENT: { status: 400, rpc: Code.InvalidArgument },
  UNAUTHENTICATED: { status: 401, rpc: Code.Unauthenticated },
  INVALID_API_KEY: { status: 401, rpc: Code.Unauthenticated },
  MISSING_TENANT: { status: 401, rpc: Code.Unauthenticated },
  INVALID_SIGNATURE: { status: 401, rpc: Code.Unauthenticated },
  REQUEST_EXPIRED: { status: 401, rpc: Code.Unauthenticated },
  NONCE_REUSED: { status: 401, rpc: Code.Unauthenticated },
  INSUFFICIENT_SCOPE: { status: 403, rpc: Code.PermissionDenied },
  ACTOR_BINDING_REQUIRED: { status: 403, rpc: Code.PermissionDenied },
  ACTOR_REMOVED: { status: 403, rpc: Code.PermissionDenied },
  PERMISSION_DENIED: { status: 403, rpc: Code.PermissionDenied },
  TARGET_ACCESS_DENIED: { status: 403, rpc: Code.PermissionDenied },
  NOT_FOUND: { status: 404, rpc: Code.NotFound },
  REPLAY_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  NO_ACTIVE_RECORDING: { status: 404, rpc: Code.NotFound },
  MARKER_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  SERVER_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  CATEGORY_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  SUBSCRIPTION_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  DELIVERY_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  TENANT_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  MEMBER_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  KEY_NOT_FOUND: { status: 404, rpc: Code.NotFound },
  METHOD_NOT_ALLOWED: { status: 405, rpc: Code.Unimplemented },
  TOO_MANY_MARKERS: { status: 409, rpc: Code.FailedPrecondition },
  DELIVERY_NOT_REPLAYABLE: { status: 409, rpc: Code.FailedPrecondition },
  SERVER_LIMIT_REACHED: { status: 409, rpc: Code.FailedPrecondition },
  INVALID_TRANSITION: { status: 409, rpc: Code.FailedPrecondition },
  RECORDING_IN_PROGRESS: { status: 409, rpc: Code.FailedPrecondition },
  SERVER_NOT_CONNECTED: { status: 409, rpc: Code.FailedPrecondition },
  SERVER_DEAUTHORISED: { status: 409, rpc: Code.FailedPrecondition },
  STORAGE_QUOTA_EXCEEDED: { status: 409, rpc: Code.FailedPrecondition },
  PAYLOAD_TOO_LARGE: { status: 413, rpc: Code.ResourceExhausted },
  VALIDATION_ERROR: { status: 422, rpc: Code.InvalidArgument },
  IDEMPOTENCY_KEY_REUSED: { status: 422, rpc: Code.InvalidArgument },
  RATE_LIMITED: { status: 429, rpc: Code.ResourceExhausted },
  INTERNAL_ERROR: { status: 500, rpc: Code.Internal },
  NOT_IMPLEMENTED: { status: 501, rpc: Code.Unimplemented },
  SERVICE_UNAVAILABLE: { status: 503, rpc: Code.Unavailable },
  WEBHOOK_DELIVERY_UNCONFIGURED: { status: 503, rpc: Code.Unavailable },
} as const satisfies Record<string, { status: number; rpc: Code }>;

export type ErrorCode = keyof typeof errorCodes;

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(errorCodes, code);
}

/** Rendered into problem+json `errors[]`. */
export type FieldViolation = { field: string; code: ErrorCode; detail: string };

/** A failure the contract names; anything else thrown is a fault, INTERNAL_ERROR with no detail leaked. */
export class DomainError extends Error {
  override name = "DomainError";
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly violations: readonly FieldViolation[] = [],
    options?: ErrorOptions,
  ) {
    super(detail, options);
  }
}
