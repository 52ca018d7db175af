import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { asCaller, contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { createMarkersService } from "./markers-service.js";
import * as store from "./store.js";

// What the markers service does, call by call: MarkersService served in this process on the real
// schema, its projections of replays and servers written as their events leave them (events.ts;
// services/markers/events.test.ts feeds the events themselves). The public API's answers are
// test/markers.test.ts.

async function markersOn() {
  const testDb = await createTestDb("markers");
  const { db } = testDb;
  const tenantId = randomUUID();
  const serverId = randomUUID();
  const replayId = randomUUID();
  // replays.recording.started for a connected server, as the consumers project it.
  await db.transaction(async (tx) => {
    await store.upsertServerState(tx, { serverId, tenantId, state: "connected" });
    await store.upsertReplayStarted(tx, { replayId, tenantId, serverId, startedAt: new Date() });
  });
  const markers = inMemoryClient(MarkersService, (router) =>
    router.service(MarkersService, createMarkersService({ db, now: () => new Date(), projectionWaitMs: 0 })),
  );
  return { testDb, tenantId, serverId, replayId, markers, as: asCaller({ tenantId }) };
}

describe("markers service", () => {
  it("creates markers by replay and by server (its recording in progress), lists and deletes them", async () => {
    const { testDb, serverId, replayId, markers, as } = await markersOn();
    await using _ = testDb;

    const byReplay = (await markers.createMarker({ replayId, tick: 10n, label: "start", colour: "#AABBCC" }, as))
      .marker;
    const byServer = (await markers.createMarker({ serverId, tick: 20n, label: "boss", icon: "skull" }, as)).marker;
    expect(byReplay).toMatchObject({ replayId, tick: 10n, label: "start", colour: "#aabbcc" });
    expect(byServer).toMatchObject({ replayId, tick: 20n, label: "boss", icon: "skull" });

    const listed = (await markers.listMarkers({ replayId }, as)).markers;
    expect(listed.map((m) => m.markerId).sort()).toEqual([byReplay?.markerId, byServer?.markerId].sort());

    await markers.deleteMarker({ markerId: byReplay?.markerId ?? "" }, as);
    expect((await markers.listMarkers({ replayId }, as)).markers.map((m) => m.markerId)).toEqual([byServer?.markerId]);
    expect(await contractCodeOfCall(markers.deleteMarker({ markerId: byReplay?.markerId ?? "" }, as))).toBe(
      "MARKER_NOT_FOUND",
    );
  });

  it("answers a repeated Idempotency-Key with the first marker, and refuses it with another body", async () => {
    const { testDb, replayId, markers, as } = await markersOn();
    await using _ = testDb;
    const create = (label: string, requestFingerprint: string) =>
      markers.createMarker({ replayId, tick: 1n, label, idempotencyKey: "key-1", requestFingerprint }, as);

    const first = (await create("once", "fp-1")).marker;
    const again = (await create("once", "fp-1")).marker;
    expect(again?.markerId).toBe(first?.markerId);
    expect((await markers.listMarkers({ replayId }, as)).markers).toHaveLength(1);
    expect(await contractCodeOfCall(create("other", "fp-2"))).toBe("IDEMPOTENCY_KEY_REUSED");
  });

  it("refuses what it cannot place: an unknown or another tenant's replay, a server with nothing recording, a bad field", async () => {
    const { testDb, tenantId, replayId, markers, as } = await markersOn();
    await using _ = testDb;
    const idle = randomUUID();
    await testDb.db.transaction((tx) => store.upsertServerState(tx, { serverId: idle, tenantId, state: "connected" }));

    expect(await contractCodeOfCall(markers.createMarker({ replayId: randomUUID(), tick: 1n, label: "x" }, as))).toBe(
      "REPLAY_NOT_FOUND",
    );
    const stranger = asCaller({ tenantId: randomUUID() });
    expect(await contractCodeOfCall(markers.listMarkers({ replayId }, stranger))).toBe("REPLAY_NOT_FOUND");
    expect(await contractCodeOfCall(markers.createMarker({ serverId: idle, tick: 1n, label: "x" }, as))).toBe(
      "NO_ACTIVE_RECORDING",
    );
    expect(await contractCodeOfCall(markers.createMarker({ replayId, tick: -1n, label: "x" }, as))).toBe(
      "INVALID_TICK",
    );
    expect(await contractCodeOfCall(markers.createMarker({ replayId, serverId: idle, tick: 1n, label: "x" }, as))).toBe(
      "INVALID_TARGET",
    );
  });
});
