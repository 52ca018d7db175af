import type { Client } from "@connectrpc/connect";
import type { Marker, MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import { DomainError } from "../../lib/errors.js";
import { sha256Hex } from "../../lib/signing.js";
import { canonicalJson, isoOrNull, optionalStringField } from "./json.js";
import { type Route, type RouteCall, readJsonObject } from "./route.js";

/** The marker of decisions.md §3: every field present, unset ones null; the server id never. */
export function markerEntry(marker: Marker) {
  return {
    id: marker.markerId,
    replayId: marker.replayId,
    tick: Number(marker.tick),
    label: marker.label,
    category: marker.category ?? null,
    colour: marker.colour ?? null,
    icon: marker.icon ?? null,
    actor: marker.actor ?? null,
    createdAt: isoOrNull(marker.createdAt),
  };
}

const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;

/** The Idempotency-Key header (decisions.md §3): "" when absent, else 1 to 255 visible ASCII characters. */
function idempotencyKeyOf(call: RouteCall): string {
  const value = call.headers["idempotency-key"];
  if (value === undefined) return "";
  if (typeof value === "string" && idempotencyKeyPattern.test(value)) return value;
  throw new DomainError("INVALID_IDEMPOTENCY_KEY", "Idempotency-Key must be 1 to 255 visible ASCII characters");
}

/**
 * The tick as the RPC takes it: unset when absent or null; a JSON number with an integral value that
 * fits int64 as it is (the service checks 0 to 2^53-1); anything else is malformed (INVALID_TICK).
 */
function tickField(body: Record<string, unknown>, malformed: string[]): bigint | undefined {
  const value = body.tick;
  if (value === undefined || value === null) return undefined;
  if (typeof value === "number" && Number.isInteger(value) && Math.abs(value) < 2 ** 63) return BigInt(value);
  malformed.push("tick");
  return undefined;
}

/**
 * A create's JSON body as the RPC takes it: strings and the tick as the client sent them, unset when
 * absent or null, and the fields of the wrong JSON type named in `malformedFields` (the service
 * refuses each with its own code at its turn).
 */
export function markerRequestOf(body: Record<string, unknown>) {
  const malformedFields: string[] = [];
  const text = (field: string) => optionalStringField(body, field, malformedFields);
  return {
    replayId: text("replayId"),
    serverId: text("serverId"),
    tick: tickField(body, malformedFields),
    label: text("label"),
    category: text("category"),
    colour: text("colour"),
    icon: text("icon"),
    actor: text("actor"),
    malformedFields,
  };
}

/** Timeline markers: spec "Timeline markers", decisions.md §3. */
export function markerRoutes(markers: Client<typeof MarkersService>): Route[] {
  return [
    {
      method: "POST",
      path: "/v1/api/timeline-events",
      auth: "api-key",
      scope: "replays:write",
      doc: {
        operationId: "createTimelineEvent",
        tag: "Timeline markers",
        summary: "Add a marker to a replay's timeline",
        description:
          "Pins a labelled moment to a replay, by `replayId`, or by `serverId` to the recording in progress on that server. Validation runs in the order of decisions.md §1, the first failure answering. A replay holds at most 500 markers. Send it asynchronously: never block a game-server thread on it.",
        headers: [
          {
            name: "Idempotency-Key",
            description:
              "1 to 255 visible ASCII characters. A retry with the same key and body within 24 h answers the first marker again; the same key with another body is 422 IDEMPOTENCY_KEY_REUSED.",
            schema: { type: "string", pattern: "^[\\x21-\\x7e]{1,255}$" },
          },
        ],
        requestBody: "MarkerCreate",
        success: { status: 201, description: "The stored marker.", schema: "Marker" },
        errors: [
          "INVALID_TARGET",
          "INVALID_REPLAY_ID",
          "INVALID_SERVER_ID",
          "INVALID_TICK",
          "INVALID_LABEL",
          "INVALID_CATEGORY",
          "INVALID_COLOUR",
          "INVALID_ICON",
          "INVALID_ACTOR",
          "INVALID_IDEMPOTENCY_KEY",
          "REPLAY_NOT_FOUND",
          "NO_ACTIVE_RECORDING",
          "TOO_MANY_MARKERS",
          "IDEMPOTENCY_KEY_REUSED",
        ],
      },
      async handle(call) {
        const body = readJsonObject(call);
        const idempotencyKey = idempotencyKeyOf(call);
        const requestFingerprint = idempotencyKey === "" ? "" : sha256Hex(canonicalJson(body));
        // Object.assign onto the literal, not a spread with more properties after it (V8's slow path).
        const res = await markers.createMarker(
          Object.assign(markerRequestOf(body), { idempotencyKey, requestFingerprint }),
          call.rpc,
        );
        return { status: 201, body: res.marker ? markerEntry(res.marker) : undefined };
      },
    },
    {
      method: "DELETE",
      path: "/v1/api/timeline-events/:id",
      auth: "api-key",
      scope: "replays:write",
      doc: {
        operationId: "deleteTimelineEvent",
        tag: "Timeline markers",
        summary: "Delete a marker",
        pathParams: { id: "The marker's id." },
        success: { status: 204, description: "The marker is gone." },
        errors: ["INVALID_MARKER_ID", "MARKER_NOT_FOUND"],
      },
      async handle(call) {
        await markers.deleteMarker({ markerId: call.params.id ?? "" }, call.rpc);
        return { status: 204 };
      },
    },
    {
      method: "GET",
      path: "/v1/api/replays/:id/timeline-events",
      auth: "api-key",
      scope: "replays:read",
      doc: {
        operationId: "listTimelineEvents",
        tag: "Timeline markers",
        summary: "List a replay's markers",
        description: "Every marker of the replay (at most 500), by tick.",
        pathParams: { id: "The replay's id." },
        success: { status: 200, description: "The replay's markers.", schema: "MarkerList" },
        errors: ["INVALID_REPLAY_ID", "REPLAY_NOT_FOUND"],
      },
      async handle(call) {
        const res = await markers.listMarkers({ replayId: call.params.id ?? "" }, call.rpc);
        return { status: 200, body: { timelineEvents: res.markers.map(markerEntry) } };
      },
    },
  ];
}
