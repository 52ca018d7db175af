// @replay/client: a typed client for the replay service's public API.
export {
  createReplayClient,
  type DeliveryListQuery,
  type ReplayClient,
  type ReplayClientOptions,
  type ReplayListQuery,
} from "./client.js";
export { clockSkewSeconds, ERROR_CODES, type ErrorCode, isErrorCode, type Problem } from "./errors.js";
export type { components, operations, paths } from "./openapi.js";
export { paged, ReplayApiError } from "./paging.js";
export { DEFAULT_RETRY, type RetryOptions } from "./retry.js";
export {
  canonicalQuery,
  rfc3986Encode,
  SIGNING_SCHEME,
  type SignedRequest,
  type SigningKey,
  type SignRequestInput,
  signRequest,
} from "./signing.js";
export { isSignedPath, USER_AGENT } from "./transport.js";
export {
  type VerifyWebhookOptions,
  type VerifyWebhookResult,
  verifyWebhook,
  WEBHOOK_EVENT_NAMES,
  type WebhookAsset,
  type WebhookCollection,
  type WebhookEvent,
  type WebhookEventName,
  type WebhookEventOf,
  type WebhookHeaders,
} from "./webhooks.js";
