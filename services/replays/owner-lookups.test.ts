import { randomUUID } from "node:crypto";
import type { ConnectRouter } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MarkerTargetOutcome, ReplayLookupService } from "../../gen/replay/replays/v1/lookup_pb.js";
import { RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { plansOf, serversFromProjection } from "./_testing.js";
import { createReplayLookupService } from "./lookup-service.js";
import { createRecordingService } from "./recording-service.js";
import * as store from "./store.js";

// What the replays service decides from its owners' answers, and answers as the owner of replays:
// StartRecording on the servers service's word, not on its projection's; the markers service's
// targets resolved on its own rows (the markers service's use of them: services/markers/*.test.ts;
// through the processes: test/read-your-writes.test.ts).

async function replaysOn() {
  const testDb = await createTestDb("replays");
  const owner = serversFromProjection(testDb.db);
  const plans = plansOf();
  const routes = (router: ConnectRouter) => {
    const deps = {
      db: testDb.db,
      blobs: undefined as never,
      now: () => new Date(),
      lookupServer: owner,
      lookupPlan: plans,
    };
    router.service(RecordingService, createRecordingService(deps));
    router.service(ReplayLookupService, createReplayLookupService(deps));
  };
  return {
    testDb,
    owner,
    plans,
    recording: inMemoryClient(RecordingService, routes),
    lookup: inMemoryClient(ReplayLookupService, routes),
  };
}

describe("StartRecording on the servers service's word", () => {
  it("starts on a server checked in a moment ago that the projection has not heard of, or knows as pending", async () => {
    const { testDb, owner, recording } = await replaysOn();
    await using _ = testDb;
    const tenantId = randomUUID();
    const unheard = randomUUID();
    owner.answers.set(unheard, { tenantId, state: "connected" });
    const { replayId } = await recording.startRecording({ serverId: unheard, integration: "rust" });
    expect(await store.findServerById(testDb.db, unheard)).toEqual({ tenant_id: tenantId, state: "connected" });
    expect((await store.findReplayById(testDb.db, tenantId, replayId))?.status).toBe("recording");

    const pending = randomUUID();
    await testDb.db.transaction((tx) => store.upsertServerState(tx, { serverId: pending, tenantId, state: "pending" }));
    expect(await contractCodeOfCall(recording.startRecording({ serverId: pending, integration: "rust" }))).toBe(
      "SERVER_NOT_CONNECTED",
    );
    owner.answers.set(pending, { tenantId, state: "connected" });
    expect(await contractCodeOfCall(recording.startRecording({ serverId: pending, integration: "rust" }))).toBe("OK");
  });

  it("refuses a server deauthorised or purged a moment ago that the projection still has connected", async () => {
    const { testDb, owner, recording } = await replaysOn();
    await using _ = testDb;
    const tenantId = randomUUID();
    const [deauthorised, purged] = [randomUUID(), randomUUID()];
    for (const serverId of [deauthorised, purged]) {
      await testDb.db.transaction((tx) => store.upsertServerState(tx, { serverId, tenantId, state: "connected" }));
    }
    owner.answers.set(deauthorised, { tenantId, state: "deauthorised" });
    owner.answers.set(purged, undefined);
    expect(await contractCodeOfCall(recording.startRecording({ serverId: deauthorised, integration: "x" }))).toBe(
      "SERVER_DEAUTHORISED",
    );
    expect(await contractCodeOfCall(recording.startRecording({ serverId: purged, integration: "x" }))).toBe(
      "SERVER_NOT_FOUND",
    );
  });
});

describe("StartRecording on the gateway's word for a plan it has not heard of", () => {
  it("gives the first recording of a tenant created a moment ago its plan's retention and quota", async () => {
    const { testDb, owner, plans, recording } = await replaysOn();
    await using _ = testDb;
    const [tenantId, serverId] = [randomUUID(), randomUUID()];
    owner.answers.set(serverId, { tenantId, state: "connected" });
    plans.answers.set(tenantId, { serverLimit: 5n, storageQuotaBytes: 0n, version: 2n, retentionDays: 3, hotDays: 1 });
    // A quota of 0 is used up: the plan was applied before the check.
    expect(await contractCodeOfCall(recording.startRecording({ serverId, integration: "x" }))).toBe(
      "STORAGE_QUOTA_EXCEEDED",
    );
    plans.answers.set(tenantId, { serverLimit: 5n, storageQuotaBytes: 10n, version: 3n, retentionDays: 3, hotDays: 1 });
    const { replayId } = await recording.startRecording({ serverId, integration: "x" });
    const row = await store.findReplayById(testDb.db, tenantId, replayId);
    expect(row && (row.retention_until.getTime() - row.started_at.getTime()) / 86_400_000).toBe(3);
    expect(await store.findTenantStorage(testDb.db, tenantId)).toMatchObject({ plan_version: 3n, retention_days: 3 });
  });
});

describe("ResolveMarkerTargets", () => {
  it("resolves replays by id for their tenant, and servers to their recording in progress", async () => {
    const { testDb, owner, recording, lookup } = await replaysOn();
    await using _ = testDb;
    const tenantId = randomUUID();
    const [live, idle, deauthorised, purged, unheard, stranger] = Array.from({ length: 6 }, () => randomUUID());
    for (const serverId of [live, idle, deauthorised]) owner.answers.set(serverId, { tenantId, state: "connected" });
    const { replayId } = await recording.startRecording({ serverId: live, integration: "x" });
    const { replayId: deauthorisedReplay } = await recording.startRecording({
      serverId: deauthorised,
      integration: "x",
    });
    await recording
      .startRecording({ serverId: idle, integration: "x" })
      .then(({ replayId: r }) => recording.finishRecording({ replayId: r, sizeBytes: 1n }));
    await testDb.db.transaction(async (tx) => {
      await store.upsertServerState(tx, { serverId: deauthorised, tenantId, state: "deauthorised" });
      await store.upsertServerState(tx, { serverId: purged, tenantId, state: "connected" });
      await store.deleteServer(tx, purged);
    });
    owner.answers.set(unheard, { tenantId, state: "pending" });
    owner.answers.set(stranger, undefined);

    const asked = [
      { tenantId, target: { case: "replayId", value: replayId } },
      { tenantId: randomUUID(), target: { case: "replayId", value: replayId } },
      { tenantId, target: { case: "replayId", value: randomUUID() } },
      { tenantId, target: { case: "serverId", value: live } },
      { tenantId, target: { case: "serverId", value: idle } },
      { tenantId, target: { case: "serverId", value: deauthorised } },
      { tenantId, target: { case: "serverId", value: purged } },
      { tenantId, target: { case: "serverId", value: unheard } },
      { tenantId, target: { case: "serverId", value: stranger } },
      { tenantId: randomUUID(), target: { case: "serverId", value: live } },
      { tenantId, target: { case: "replayId", value: deauthorisedReplay } },
    ] as const;
    const { targets } = await lookup.resolveMarkerTargets({ targets: [...asked] });
    const { FOUND, NOT_FOUND, NOT_RECORDING } = MarkerTargetOutcome;
    expect(targets.map((t) => t.outcome)).toEqual([
      FOUND,
      NOT_FOUND,
      NOT_FOUND,
      FOUND,
      NOT_RECORDING,
      NOT_RECORDING,
      NOT_FOUND,
      NOT_RECORDING,
      NOT_FOUND,
      NOT_FOUND,
      FOUND,
    ]);
    expect(targets[0]).toMatchObject({ replayId, serverId: live, recording: true });
    expect(targets[3]).toMatchObject({ replayId, serverId: live, recording: true });
    expect(
      await contractCodeOfCall(
        lookup.resolveMarkerTargets({ targets: [{ tenantId, target: { case: "replayId", value: "nope" } }] }),
      ),
    ).toBe("INVALID_ARGUMENT");
  });
});
