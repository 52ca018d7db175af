import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Consumer, EventHandler } from "../../lib/bus/consumer.js";
import type { EventOf } from "../../lib/bus/events.js";
import * as store from "./store.js";

function replayOf(event: EventOf<"replays.recording.started" | "replays.recording.finished">) {
  return {
    replayId: event.replayId,
    tenantId: event.tenantId,
    serverId: event.serverId,
    startedAt: event.startedAt ? timestampDate(event.startedAt) : null,
  };
}

function toState<
  S extends
    | "servers.server.created"
    | "servers.server.connected"
    | "servers.server.deauthorised"
    | "servers.server.purged",
>(state: store.ServerState): EventHandler<S> {
  return (tx, event) => store.upsertServerState(tx, { serverId: event.serverId, tenantId: event.tenantId, state });
}

/** Subjects are consumed independently, so each handler leaves the same row whatever order events arrive in. */
export const markersConsumers: Consumer[] = [
  {
    durable: "markers_replays",
    handlers: {
      "replays.recording.started": (tx, event) => store.upsertReplayStarted(tx, replayOf(event)),
      "replays.recording.finished": (tx, event) => store.upsertReplayFinished(tx, replayOf(event)),
      "replays.replay.deleted": (tx, event) =>
        store.deleteReplay(tx, { replayId: event.replayId, tenantId: event.tenantId, serverId: event.serverId }),
    },
  },
  {
    durable: "markers_servers",
    handlers: {
      "servers.server.created": toState("pending"),
      "servers.server.connected": toState("connected"),
      "servers.server.deauthorised": toState("deauthorised"),
      "servers.server.purged": toState("purged"),
    },
  },
];
