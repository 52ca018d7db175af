// The JSON Schemas (OpenAPI 3.1, JSON Schema 2020-12) of every public body, by component name.
// Each mirrors the gateway's mapping of a service reply (routes/*.ts) or a body it reads; the
// contract test (test/openapi.test.ts) validates real responses against them, so they cannot drift.

import { MARKER_ICONS, WEBHOOK_EVENTS } from "../../lib/vocabulary.js";

export type JsonSchema = { [keyword: string]: unknown };

const uuid: JsonSchema = { type: "string", format: "uuid" };
const timestamp: JsonSchema = {
  type: "string",
  format: "date-time",
  description: "RFC 3339 UTC with millisecond precision and a Z suffix.",
  examples: ["2026-11-26T09:30:00.000Z"],
};
const nullable = (schema: JsonSchema): JsonSchema => ({
  ...schema,
  type: [schema.type as string, "null"],
  ...(schema.enum ? { enum: [...(schema.enum as unknown[]), null] } : {}),
});
const object = (properties: Record<string, JsonSchema>, description?: string): JsonSchema => ({
  type: "object",
  ...(description ? { description } : {}),
  properties,
  required: Object.keys(properties),
});
const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const pageToken: JsonSchema = {
  type: "string",
  description: "The next page's opaque token; empty exactly when no item follows this page.",
};

/** Every component schema of the document. */
export const schemas: Record<string, JsonSchema> = {
  Problem: {
    type: "object",
    description:
      "RFC 9457 problem details, on every error of every route (decisions.md §1). `code` is the stable, machine-readable part.",
    properties: {
      type: { type: "string", examples: ["about:blank"] },
      title: { type: "string", examples: ["Bad Request"] },
      status: { type: "integer", minimum: 400, maximum: 599 },
      code: { type: "string", description: "The contract's error code." },
      detail: { type: "string" },
      instance: { type: "string", description: "The request id (also in `X-Request-Id`)." },
      errors: {
        type: "array",
        description: "One entry per invalid field, on validation failures.",
        items: object({ field: { type: "string" }, code: { type: "string" }, detail: { type: "string" } }),
      },
    },
    required: ["type", "title", "status", "code", "detail"],
  },

  MarkerCreate: {
    type: "object",
    description:
      "Exactly one of `replayId` (a finished or recording replay) and `serverId` (the server's recording in progress). Lengths count Unicode code points after trimming.",
    properties: {
      replayId: { ...uuid, description: "The replay to pin the marker to." },
      serverId: { ...uuid, description: "Pin the marker to this server's recording in progress." },
      tick: { type: "integer", minimum: 0, maximum: 2 ** 53 - 1, description: "Recorder ticks from the start." },
      label: { type: "string", minLength: 1, maxLength: 120 },
      category: { type: ["string", "null"], maxLength: 60 },
      colour: { type: ["string", "null"], pattern: "^#[0-9A-Fa-f]{6}$", examples: ["#ff8800"] },
      icon: { type: ["string", "null"], enum: [...MARKER_ICONS, null] },
      actor: { type: ["string", "null"], maxLength: 80, description: "Free-form attribution." },
    },
    required: ["tick", "label"],
    examples: [{ replayId: "3f0c2a9e-5b1d-4c1e-9a57-2f6d1b8e4a10", tick: 1200, label: "First blood", icon: "swords" }],
  },
  Marker: object({
    id: uuid,
    replayId: uuid,
    tick: { type: "integer", minimum: 0 },
    label: { type: "string" },
    category: nullable({ type: "string" }),
    colour: nullable({ type: "string", pattern: "^#[0-9a-f]{6}$", description: "Always lower case." }),
    icon: nullable({ type: "string", enum: [...MARKER_ICONS] }),
    actor: nullable({ type: "string" }),
    createdAt: timestamp,
  }),
  MarkerList: object({ timelineEvents: { type: "array", items: ref("Marker") } }),

  Server: object({
    id: uuid,
    name: { type: "string", minLength: 1, maxLength: 64 },
    status: { type: "string", enum: ["online", "offline"], description: "Online: checked in within 15 minutes." },
    lastSeenAt: nullable(timestamp),
    pluginVersion: nullable({ type: "string" }),
    replayCount: { type: "integer", minimum: 0 },
    categoryId: nullable(uuid),
    state: { type: "string", enum: ["connected", "deauthorised"] },
  }),
  ServerList: object({ servers: { type: "array", items: ref("Server") } }),
  PendingSetup: object({
    serverId: uuid,
    name: { type: "string" },
    categoryId: nullable(uuid),
    createdAt: timestamp,
    sourceServerId: nullable({ ...uuid, description: "Shown to workspace owners only (null for others)." }),
  }),
  PendingSetupList: object({ pending: { type: "array", items: ref("PendingSetup") } }),
  ServerCreate: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 64, description: "Trimmed; no control characters." },
      categoryId: { ...uuid, description: "A category of the tenant to place the setup in." },
      sourceServerId: { ...uuid, description: "A server the member can manage, whose setup is copied." },
    },
    required: ["name"],
  },
  PendingSetupCreated: object({ serverId: uuid, name: { type: "string", description: "The cleaned name." } }),
  ServerRename: {
    type: "object",
    properties: { name: { type: "string", minLength: 1, maxLength: 64 } },
    required: ["name"],
  },

  ReplayMetadata: object({
    id: uuid,
    server_id: uuid,
    integration: { type: "string", description: "The game integration's name." },
    quality: nullable({ type: "string", enum: ["standard", "hd"] }),
    started_at: nullable(timestamp),
    ended_at: nullable({ ...timestamp, description: "Null while recording." }),
    duration_ms: nullable({ type: "integer", minimum: 0 }),
    size_bytes: nullable({ type: "integer", minimum: 0 }),
    storage_tier: nullable({ type: "string", enum: ["hot", "cold"] }),
    retention_until: nullable(timestamp),
    visibility: nullable({ type: "string", enum: ["staff", "public"] }),
    format_version: nullable({ type: "integer" }),
    status: nullable({ type: "string", enum: ["recording", "processing", "ready", "failed", "expired"] }),
  }),
  ReplayPage: object({
    results: { type: "array", items: ref("ReplayMetadata") },
    next_page_token: pageToken,
    page_size: { type: "integer", minimum: 1, maximum: 100, description: "The page size used." },
  }),

  SubscriptionCreate: {
    type: "object",
    properties: {
      url: {
        type: "string",
        format: "uri",
        maxLength: 2048,
        description:
          "HTTPS, no user-info, never a private, loopback, link-local, CGNAT, multicast or otherwise reserved address (checked again at every attempt).",
      },
      events: {
        type: "array",
        minItems: 1,
        maxItems: 32,
        uniqueItems: true,
        items: { type: "string", enum: [...WEBHOOK_EVENTS] },
      },
    },
    required: ["url", "events"],
    examples: [{ url: "https://hooks.example.com/replays", events: ["collection.finalized", "asset.ready"] }],
  },
  Subscription: object({
    id: uuid,
    url: { type: "string" },
    events: { type: "array", items: { type: "string", enum: [...WEBHOOK_EVENTS] } },
    createdAt: timestamp,
  }),
  SubscriptionCreated: {
    ...object({
      id: uuid,
      url: { type: "string" },
      events: { type: "array", items: { type: "string", enum: [...WEBHOOK_EVENTS] } },
      createdAt: timestamp,
      secret: {
        type: "string",
        pattern: "^whsec_[A-Za-z0-9_-]{43}$",
        description: "The signing secret: shown in this response only, never again.",
      },
    }),
  },
  SubscriptionList: object({ subscriptions: { type: "array", items: ref("Subscription") } }),
  DeliveryAttempt: object({
    attempt: { type: "integer", minimum: 1 },
    trigger: { type: "string", enum: ["automatic", "manual"] },
    started_at: timestamp,
    duration_ms: { type: "integer", minimum: 0 },
    status_code: nullable({ type: "integer", description: "Null when no HTTP answer came." }),
    error: nullable({ type: "string", description: "Why the attempt failed (`HTTP 500`, `timeout`, ...)." }),
  }),
  Delivery: object({
    id: uuid,
    subscription_id: uuid,
    event_id: uuid,
    event: { type: "string", enum: [...WEBHOOK_EVENTS] },
    status: { type: "string", enum: ["pending", "succeeded", "failed"] },
    retry_count: { type: "integer", minimum: 0, description: "Manual replays so far." },
    attempts: { type: "array", description: "Newest first.", items: ref("DeliveryAttempt") },
    last_status_code: nullable({ type: "integer" }),
    last_error: nullable({ type: "string" }),
    next_attempt_at: nullable(timestamp),
    created_at: timestamp,
    updated_at: timestamp,
  }),
  DeliveryPage: object({
    results: { type: "array", items: ref("Delivery") },
    next_page_token: pageToken,
    page_size: { type: "integer", minimum: 1, maximum: 100 },
  }),
  WebhookEvent: {
    ...object({
      event_id: { ...uuid, description: "Receivers must be idempotent on it: an event may arrive more than once." },
      event: { type: "string", enum: [...WEBHOOK_EVENTS] },
      created_at: timestamp,
      tenant_id: uuid,
      data: {
        type: "object",
        description: "`collection` for collection.* events, `asset` for asset.* events.",
        properties: { collection: { type: "object" }, asset: { type: "object" } },
      },
    }),
    description:
      'The body of a delivery, signed: `X-FV-Signature: sha256=<hex HMAC-SHA256 of "<X-FV-Timestamp>.<raw body>" keyed with the secret>`.',
  },
};
