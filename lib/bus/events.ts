import {
  create,
  type DescMessage,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { KeyRevokedSchema, TenantUpsertedSchema } from "../../gen/replay/events/v1/identity_pb.js";
import {
  AssetDeletedSchema,
  AssetExpiredSchema,
  AssetFailedSchema,
  AssetProcessingSchema,
  AssetReadySchema,
  CollectionFinalizedSchema,
  CollectionReleasedSchema,
  CollectionRevokedSchema,
  RecordingFinishedSchema,
  RecordingStartedSchema,
  ReplayDeletedSchema,
} from "../../gen/replay/events/v1/replays_pb.js";
import {
  ServerConnectedSchema,
  ServerCreatedSchema,
  ServerDeauthorisedSchema,
  ServerPurgedSchema,
} from "../../gen/replay/events/v1/servers_pb.js";
import { newId } from "../ids.js";

/** Every subject ↔ payload message (ARCHITECTURE.md "Events"); test/boundaries.test.ts checks it is complete. */
export const eventSchemas = {
  "identity.tenant.upserted": TenantUpsertedSchema,
  "identity.key.revoked": KeyRevokedSchema,
  "servers.server.created": ServerCreatedSchema,
  "servers.server.connected": ServerConnectedSchema,
  "servers.server.deauthorised": ServerDeauthorisedSchema,
  "servers.server.purged": ServerPurgedSchema,
  "replays.recording.started": RecordingStartedSchema,
  "replays.recording.finished": RecordingFinishedSchema,
  "replays.replay.deleted": ReplayDeletedSchema,
  "replays.collection.finalized": CollectionFinalizedSchema,
  "replays.collection.released": CollectionReleasedSchema,
  "replays.collection.revoked": CollectionRevokedSchema,
  "replays.asset.processing": AssetProcessingSchema,
  "replays.asset.ready": AssetReadySchema,
  "replays.asset.failed": AssetFailedSchema,
  "replays.asset.expired": AssetExpiredSchema,
  "replays.asset.deleted": AssetDeletedSchema,
} as const satisfies Record<string, DescMessage>;

export type EventSubject = keyof typeof eventSchemas;
export type EventOf<S extends EventSubject> = MessageShape<(typeof eventSchemas)[S]>;

export type OutgoingEvent = { subject: EventSubject; eventId: string; payload: Uint8Array };

/** A fresh event id and `occurred_at` unless given. */
export function buildEvent<S extends EventSubject>(
  subject: S,
  init: Omit<MessageInitShape<(typeof eventSchemas)[S]>, "eventId" | "occurredAt" | "$typeName"> & { eventId?: string },
): OutgoingEvent {
  const schema = eventSchemas[subject] as DescMessage;
  const eventId = init.eventId ?? newId();
  // Object.assign, not a spread with properties after it: V8's slow path, once per event.
  const message = create(
    schema,
    Object.assign({}, init, { eventId, occurredAt: timestampNow() }) as MessageInitShape<DescMessage>,
  );
  return { subject, eventId, payload: toBinary(schema, message) };
}

export function decodeEvent<S extends EventSubject>(subject: S, data: Uint8Array): EventOf<S> {
  return fromBinary(eventSchemas[subject] as DescMessage, data) as EventOf<S>;
}
