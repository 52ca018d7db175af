// @replay/client: a typed client for the replay service's public API.
export { createReplayClient, isSignedPath, type ReplayClient, type ReplayClientOptions } from "./client.js";
export { ERROR_CODES, type ErrorCode, isErrorCode, type Problem } from "./errors.js";
export type { components, operations, paths } from "./openapi.js";
export { listReplays, paged, ReplayApiError, type ReplayListQuery } from "./paging.js";
export {
  canonicalQuery,
  rfc3986Encode,
  SIGNING_SCHEME,
  type SignedRequest,
  type SigningKey,
  type SignRequestInput,
  signRequest,
} from "./signing.js";
export {
  type VerifyWebhookOptions,
  type VerifyWebhookResult,
  verifyWebhook,
  type WebhookEvent,
  type WebhookHeaders,
} from "./webhooks.js";
