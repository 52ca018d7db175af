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

type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];

/** When each event fires (spec "Events"), the description of its body. */
const EVENT_MEANING: Record<WebhookEventName, string> = {
  "collection.finalized": "the recording finished and its recorded state is durable, whether or not an asset is ready.",
  "collection.released": "the collection became public.",
  "collection.revoked": "the collection was taken down for good.",
  "asset.processing": "the media pipeline began producing playable bytes.",
  "asset.ready": "playable bytes exist; the collection may still be held (visibility `staff`).",
  "asset.failed": "the media pipeline failed permanently.",
  "asset.expired": "retention reaped the archive.",
  "asset.deleted": "the replay was deleted (`DELETE /v1/replays/{id}`) or redacted, rather than reaped by retention.",
};

/** The component name of one event's body: `asset.ready` is `WebhookEventAssetReady`. */
export function webhookEventSchemaName(event: WebhookEventName): string {
  return `WebhookEvent${event.replace(/(?:^|\.)([a-z])/g, (_all, letter: string) => letter.toUpperCase())}`;
}

// `data` holds the snapshot the event carries, never null. services/webhooks/payload.ts would write
// null for a missing snapshot or timestamp, but every producer sets them all: collectionOf and assetOf
// (services/replays/lifecycle.ts) and deleteReplay (replays-service.ts) fill them from NOT NULL
// columns, and a collection event comes only after the finish that sets ended_at. What may be unset
// is nullable below, as the proto's CollectionSnapshot and AssetSnapshot say.
// test/client-webhooks.test.ts validates real deliveries of all eight events against these schemas.
function webhookEventSchema(event: WebhookEventName): JsonSchema {
  const data: Record<string, JsonSchema> = event.startsWith("collection.")
    ? { collection: ref("WebhookCollection") }
    : { asset: ref("WebhookAsset") };
  return object(
    {
      event_id: { ...uuid, description: "Receivers must be idempotent on it: an event may arrive more than once." },
      event: { type: "string", enum: [event], description: "The event, as in `X-FV-Event`." },
      created_at: { ...timestamp, description: "When the change happened (the same on every attempt)." },
      tenant_id: uuid,
      data: object(data),
    },
    `The body of \`${event}\`: ${EVENT_MEANING[event]}`,
  );
}

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
  SubscriptionRecord: object({
    id: uuid,
    url: { type: "string" },
    events: { type: "array", items: { type: "string", enum: [...WEBHOOK_EVENTS] } },
    createdAt: timestamp,
    disabled: { type: "boolean", description: "Nothing is sent while disabled; events are held." },
    disabledReason: nullable({ type: "string", enum: ["manual", "failing"], description: "Null when enabled." }),
    disabledAt: nullable(timestamp),
    rateLimitPerSecond: nullable({ type: "integer", minimum: 1, maximum: 10_000, description: "Null: unlimited." }),
    previousSecretExpiresAt: nullable({
      ...timestamp,
      description: "When the previous secret stops signing `X-FV-Signature`; null when no overlap runs.",
    }),
  }),
  SubscriptionUpdate: {
    type: "object",
    properties: {
      url: { type: "string", format: "uri", maxLength: 2048, description: "The create's rules." },
      events: {
        type: "array",
        minItems: 1,
        maxItems: 32,
        uniqueItems: true,
        items: { type: "string", enum: [...WEBHOOK_EVENTS] },
      },
      disabled: { type: "boolean" },
      rateLimitPerSecond: nullable({ type: "integer", minimum: 1, maximum: 10_000, description: "Null: unlimited." }),
    },
    additionalProperties: false,
    minProperties: 1,
    examples: [{ disabled: false }, { url: "https://hooks.example.com/v2/replays", rateLimitPerSecond: 50 }],
  },
  SecretRotation: {
    type: "object",
    properties: {
      graceSeconds: {
        type: "integer",
        minimum: 0,
        maximum: 604_800,
        default: 86_400,
        description: "How long the previous secret keeps signing `X-FV-Signature`.",
      },
    },
  },
  SecretRotated: object({
    secret: {
      type: "string",
      pattern: "^whsec_[A-Za-z0-9_-]{43}$",
      description: "The new signing secret: shown in this response only.",
    },
    previousSecretExpiresAt: nullable({ ...timestamp, description: "Null with a grace of 0." }),
  }),
  DeliveryRecovery: {
    type: "object",
    properties: {
      since: { ...timestamp, description: "Deliveries created at or after this time; within the log's retention." },
      until: { ...timestamp, description: "Deliveries created before this time; default now." },
    },
    required: ["since"],
  },
  DeliveriesRecovered: object({
    queued: { type: "integer", minimum: 0, maximum: 10_000, description: "Manual attempts queued by this call." },
  }),
  SubscriptionStats: object({
    pending: { type: "integer", minimum: 0, description: "Deliveries pending now." },
    last24h: ref("AttemptCounts"),
    last7d: ref("AttemptCounts"),
  }),
  AttemptCounts: object({
    succeeded: { type: "integer", minimum: 0 },
    failed: { type: "integer", minimum: 0 },
  }),
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
  WebhookCollection: object(
    {
      id: { ...uuid, description: "The collection id: a collection is one recorded session, so it is `replay_id`." },
      replay_id: uuid,
      server_id: { ...uuid, description: "The server that recorded it." },
      state: {
        type: "string",
        enum: ["finalized", "released", "revoked"],
        description: "The state this event moved it to.",
      },
      visibility: {
        type: "string",
        enum: ["staff", "public"],
        description: "Who may view the replay after the change: `public` once released.",
      },
      status: {
        type: "string",
        enum: ["processing", "ready", "failed", "expired"],
        description: "The replay's status after the change; never `recording`, as collection events follow the finish.",
      },
      revoked: { type: "boolean", description: "Taken down for good: visibility stays `staff`, release is refused." },
      integration: nullable({ type: "string", description: "The game integration's name; null when none was named." }),
      quality: { type: "string", enum: ["standard", "hd"] },
      started_at: { ...timestamp, description: "When the recording started." },
      ended_at: { ...timestamp, description: "When the recording ended." },
      duration_ms: {
        type: "integer",
        minimum: 0,
        description: "The recording's length: `ended_at` minus `started_at`.",
      },
      size_bytes: { type: "integer", minimum: 0, description: "The archive's size in bytes." },
      format_version: { type: "integer", description: "The recorder archive format version." },
      retention_until: { ...timestamp, description: "The end of the retention window." },
    },
    "A collection (one recorded session) as the `collection.*` event left it.",
  ),
  WebhookAsset: object(
    {
      id: { ...uuid, description: "The asset id: a replay has one asset, its archive, so it is `replay_id`." },
      replay_id: { ...uuid, description: "The replay (collection) the asset belongs to." },
      server_id: { ...uuid, description: "The server that recorded the replay." },
      state: {
        type: "string",
        enum: ["processing", "ready", "failed", "expired", "deleted"],
        description: "The state this event moved it to.",
      },
      status: {
        type: "string",
        enum: ["recording", "processing", "ready", "failed", "expired"],
        description: "The replay's status at the change; for `deleted`, the one it had when deleted.",
      },
      visibility: { type: "string", enum: ["staff", "public"], description: "Who may view the replay." },
      storage_tier: { type: "string", enum: ["hot", "cold"], description: "Where the archive is (or was) stored." },
      size_bytes: nullable({
        type: "integer",
        minimum: 0,
        description: "The archive's size in bytes; null when the replay was deleted while still recording.",
      }),
      format_version: nullable({
        type: "integer",
        description: "The recorder archive format version; null when the replay was deleted while still recording.",
      }),
      retention_until: { ...timestamp, description: "The end of the retention window." },
    },
    "An asset (a replay's playable archive) as the `asset.*` event left it.",
  ),
  ...Object.fromEntries(WEBHOOK_EVENTS.map((event) => [webhookEventSchemaName(event), webhookEventSchema(event)])),
  WebhookEvent: {
    description: `The body of a delivery, signed: \`X-FV-Signature: sha256=<hex HMAC-SHA256 of "<X-FV-Timestamp>.<raw body>" keyed with the secret>\`. One schema per event, told apart by \`event\`.`,
    oneOf: WEBHOOK_EVENTS.map((event) => ref(webhookEventSchemaName(event))),
    discriminator: {
      propertyName: "event",
      mapping: Object.fromEntries(
        WEBHOOK_EVENTS.map((event) => [event, `#/components/schemas/${webhookEventSchemaName(event)}`]),
      ),
    },
  },
};
