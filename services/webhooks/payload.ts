import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { AssetSnapshot, CollectionSnapshot } from "../../gen/replay/events/v1/replays_pb.js";
import type { EventOf } from "../../lib/bus/events.js";
import { timestampIso } from "../../lib/timestamp-iso.js";
import { WEBHOOK_EVENTS } from "../../lib/vocabulary.js";

/** The eight webhook event names (spec "Events"): the vocabulary is complete. */
export const webhookEvents = WEBHOOK_EVENTS;

export type WebhookEvent = (typeof webhookEvents)[number];

export type WebhookSubject = `replays.${WebhookEvent}`;

export const webhookSubjects = webhookEvents.map((event) => `replays.${event}` as WebhookSubject);

const iso = (ts: Timestamp | undefined) => (ts ? timestampIso(ts) : null);
const int = (value: bigint | undefined) => (value === undefined ? null : Number(value));

function collectionData(c: CollectionSnapshot) {
  return {
    id: c.id,
    replay_id: c.replayId,
    server_id: c.serverId,
    state: c.state,
    visibility: c.visibility,
    status: c.status,
    revoked: c.revoked,
    integration: c.integration === "" ? null : c.integration,
    quality: c.quality,
    started_at: iso(c.startedAt),
    ended_at: iso(c.endedAt),
    duration_ms: int(c.durationMs),
    size_bytes: int(c.sizeBytes),
    format_version: c.formatVersion,
    retention_until: iso(c.retentionUntil),
  };
}

function assetData(a: AssetSnapshot) {
  return {
    id: a.id,
    replay_id: a.replayId,
    server_id: a.serverId,
    state: a.state,
    status: a.status,
    visibility: a.visibility,
    storage_tier: a.storageTier,
    size_bytes: int(a.sizeBytes),
    format_version: a.formatVersion ?? null,
    retention_until: iso(a.retentionUntil),
  };
}

/** decisions.md §6. Built once per event, so every subscription and attempt (a replay too) sends the same bytes. */
export function deliveryBody(subject: WebhookSubject, event: EventOf<WebhookSubject>): string {
  const name = subject.slice("replays.".length) as WebhookEvent;
  let data: object;
  if (name.startsWith("collection.")) {
    const { collection } = event as EventOf<`replays.collection.${string}` & WebhookSubject>;
    data = { collection: collection ? collectionData(collection) : null };
  } else {
    const { asset } = event as EventOf<`replays.asset.${string}` & WebhookSubject>;
    data = { asset: asset ? assetData(asset) : null };
  }
  return JSON.stringify({
    event_id: event.eventId,
    event: name,
    created_at: iso(event.occurredAt),
    tenant_id: event.tenantId,
    data,
  });
}
