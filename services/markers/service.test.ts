import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import { ReplayLookupService } from "../../gen/replay/replays/v1/lookup_pb.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { registry } from "../../lib/metrics.js";
import { asCaller, contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { createPeers } from "../../lib/rpc/peers.js";
import { freePorts } from "../../test/free-port.js";
import { ownerFromProjection } from "./_testing.js";
import { createMarkersService } from "./markers-service.js";
import { replayOwner } from "./replay-owner.js";
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
  const owner = ownerFromProjection(db);
  const markers = inMemoryClient(MarkersService, (router) =>
    router.service(MarkersService, createMarkersService({ db, now: () => new Date(), resolveTarget: owner })),
  );
  return { testDb, tenantId, serverId, replayId, markers, owner, as: asCaller({ tenantId }) };
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
  it("takes a replay the replays service has and this projection has not heard of yet, and learns it", async () => {
    const { testDb, tenantId, serverId, markers, owner, as } = await markersOn();
    await using _ = testDb;
    const fresh = randomUUID();
    owner.answers.set(fresh, { outcome: "found", replayId: fresh, serverId, startedAt: new Date(), recording: true });
    const created = (await markers.createMarker({ replayId: fresh, tick: 5n, label: "first" }, as)).marker;
    expect(created).toMatchObject({ replayId: fresh, tick: 5n });
    const { rows } = await testDb.db.query(
      "SELECT tenant_id, server_id, recording, marker_count FROM markers.replay WHERE replay_id = $1",
      [fresh],
    );
    expect(rows).toEqual([{ tenant_id: tenantId, server_id: serverId, recording: true, marker_count: 1 }]);
    // By server id too: the owner's recording in progress.
    const other = randomUUID();
    owner.answers.set(serverId, { outcome: "found", replayId: other, serverId, startedAt: null, recording: true });
    expect((await markers.createMarker({ serverId, tick: 6n, label: "second" }, as)).marker?.replayId).toBe(other);
  });

  it("refuses a replay whose delete reached it, whatever a late answer of the replays service says", async () => {
    const { testDb, tenantId, serverId, replayId, markers, owner, as } = await markersOn();
    await using _ = testDb;
    await testDb.db.transaction((tx) => store.deleteReplay(tx, { replayId, tenantId, serverId }));
    owner.answers.set(replayId, { outcome: "found", replayId, serverId, startedAt: null, recording: true });
    expect(await contractCodeOfCall(markers.createMarker({ replayId, tick: 1n, label: "x" }, as))).toBe(
      "REPLAY_NOT_FOUND",
    );
    const { rows } = await testDb.db.query("SELECT count(*)::int AS n FROM markers.marker WHERE replay_id = $1", [
      replayId,
    ]);
    expect(rows).toEqual([{ n: 0 }]);
  });

  it("answers a miss as the replays service does", async () => {
    const { testDb, serverId, replayId, markers, owner, as } = await markersOn();
    await using _ = testDb;
    owner.answers.set(serverId, { outcome: "not_recording" });
    expect(await contractCodeOfCall(markers.createMarker({ serverId, tick: 1n, label: "x" }, as))).toBe(
      "NO_ACTIVE_RECORDING",
    );
    owner.answers.set(replayId, { outcome: "not_found" });
    expect(await contractCodeOfCall(markers.createMarker({ replayId, tick: 1n, label: "x" }, as))).toBe(
      "REPLAY_NOT_FOUND",
    );
    expect(await contractCodeOfCall(markers.listMarkers({ replayId }, as))).toBe("REPLAY_NOT_FOUND");
  });
  it("answers 503 SERVICE_UNAVAILABLE, no sooner than it knows, when the replays service cannot be asked", async () => {
    const { testDb, replayId, as } = await markersOn();
    await using _ = testDb;
    // Nothing listens on a port just freed: every lookup is refused at once.
    const [port] = await freePorts(1);
    const peers = createPeers(() => `http://127.0.0.1:${port}`, undefined);
    try {
      const resolveTarget = replayOwner(peers.client(ReplayLookupService, "replays"));
      const markers = inMemoryClient(MarkersService, (router) =>
        router.service(MarkersService, createMarkersService({ db: testDb.db, now: () => new Date(), resolveTarget })),
      );
      expect(await contractCodeOfCall(markers.createMarker({ replayId, tick: 1n, label: "x" }, as))).toBe(
        "SERVICE_UNAVAILABLE",
      );
      expect(await contractCodeOfCall(markers.listMarkers({ replayId }, as))).toBe("SERVICE_UNAVAILABLE");
      const { rows } = await testDb.db.query("SELECT count(*)::int AS n FROM markers.marker", []);
      expect(rows).toEqual([{ n: 0 }]);
      // The operator sees them: lookups of the replays service, by outcome.
      expect(await registry.getSingleMetricAsString("replay_rpc_peer_duration_seconds")).toMatch(
        /replay_rpc_peer_duration_seconds_count\{owner="replays",method="ResolveMarkerTargets",code="unavailable"\} [1-9]/,
      );
    } finally {
      await peers.close();
    }
  });
});
