import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConnectRouter } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AssetState, RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { ReplayListRoute, ReplayStatus, ReplaysService, Visibility } from "../../gen/replay/replays/v1/replays_pb.js";
import { createFsBlobStore } from "../../lib/blob/fs.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { createPageTokens } from "../../lib/page/token.js";
import { asCaller, contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { plansOf, serversFromProjection } from "./_testing.js";
import { createRecordingService } from "./recording-service.js";
import { createReplaysService } from "./replays-service.js";
import * as store from "./store.js";

// What the replays service does, call by call: its two RPC services (RecordingService for the
// recording lifecycle the recorders and operators drive, ReplaysService for the read API and
// deletes) served in this process on the real schema, archives in a blob store on disk. The public
// API's answers for the same calls are test/recording.test.ts and test/replays.test.ts.

const QUOTA = 1_000_000n;

async function replaysOn() {
  const testDb = await createTestDb("replays");
  const { db } = testDb;
  const blobRoot = await mkdtemp(join(tmpdir(), "replays-service-"));
  const blobs = createFsBlobStore(blobRoot);
  const tenantId = randomUUID();
  const serverId = randomUUID();
  // The tenant's plan and a connected server, as the identity and servers events project them.
  await db.transaction(async (tx) => {
    await store.upsertTenantPlan(tx, {
      tenantId,
      storageQuotaBytes: QUOTA,
      version: 1n,
      retentionDays: 90,
      hotDays: 30,
    });
    await store.upsertServerState(tx, { serverId, tenantId, state: "connected" });
  });
  const routes = (router: ConnectRouter) => {
    router.service(ReplaysService, createReplaysService({ db, pageTokens: createPageTokens(randomBytes(32)) }));
    router.service(
      RecordingService,
      createRecordingService({
        db,
        blobs,
        now: () => new Date(),
        lookupServer: serversFromProjection(db),
        lookupPlan: plansOf(),
      }),
    );
  };
  return {
    db,
    tenantId,
    serverId,
    recording: inMemoryClient(RecordingService, routes),
    replays: inMemoryClient(ReplaysService, routes),
    as: asCaller({ tenantId }),
    async [Symbol.asyncDispose]() {
      await testDb[Symbol.asyncDispose]();
      await rm(blobRoot, { recursive: true, force: true });
    },
  };
}

describe("replays service", () => {
  it("takes a replay through its lifecycle: recording, processing, ready, public, revoked, expired", async () => {
    await using s = await replaysOn();
    const { recording, replays, serverId, as } = s;
    const status = async (replayId: string) => (await replays.getReplay({ replayId }, as)).replay;

    const { replayId } = await recording.startRecording({ serverId, integration: "rust" });
    expect(await status(replayId)).toMatchObject({ serverId, integration: "rust", status: ReplayStatus.RECORDING });
    expect(await contractCodeOfCall(recording.startRecording({ serverId, integration: "rust" }))).toBe(
      "RECORDING_IN_PROGRESS",
    );

    await recording.finishRecording({ replayId, sizeBytes: 1_000n });
    expect(await status(replayId)).toMatchObject({ status: ReplayStatus.PROCESSING, sizeBytes: 1_000n });
    expect(await replays.getStorageUsage({}, as)).toMatchObject({ storageUsedBytes: 1_000n, storageQuotaBytes: QUOTA });

    await recording.setAssetState({ replayId, state: AssetState.PROCESSING });
    await recording.setAssetState({ replayId, state: AssetState.READY });
    expect((await status(replayId))?.status).toBe(ReplayStatus.READY);
    await recording.releaseCollection({ replayId });
    expect((await status(replayId))?.visibility).toBe(Visibility.PUBLIC);
    await recording.revokeCollection({ replayId });
    expect((await status(replayId))?.visibility).toBe(Visibility.STAFF);
    expect(await contractCodeOfCall(recording.releaseCollection({ replayId }))).toBe("INVALID_TRANSITION");

    await recording.expireReplay({ replayId });
    expect((await status(replayId))?.status).toBe(ReplayStatus.EXPIRED);
    expect((await replays.getStorageUsage({}, as)).storageUsedBytes).toBe(0n);
  });

  it("stores an uploaded archive and finishes its replay; a delete removes the replay and frees its storage", async () => {
    await using s = await replaysOn();
    const { recording, replays, serverId, as } = s;
    const { replayId } = await recording.startRecording({ serverId, integration: "rust" });
    const parts = [Buffer.from("first "), Buffer.from("second "), Buffer.from("third")];
    const sizeBytes = BigInt(Buffer.concat(parts).length);

    async function* upload() {
      yield { replayId, sizeBytes, chunk: parts[0] };
      for (const chunk of parts.slice(1)) yield { chunk };
    }
    expect(await recording.uploadArchive(upload())).toMatchObject({ replayId, sizeBytes });
    expect((await replays.getReplay({ replayId }, as)).replay).toMatchObject({
      status: ReplayStatus.PROCESSING,
      sizeBytes,
    });
    expect((await replays.getStorageUsage({}, as)).storageUsedBytes).toBe(sizeBytes);

    await replays.deleteReplay({ replayId }, as);
    expect(await contractCodeOfCall(replays.getReplay({ replayId }, as))).toBe("REPLAY_NOT_FOUND");
    expect(await contractCodeOfCall(replays.deleteReplay({ replayId }, as))).toBe("REPLAY_NOT_FOUND");
    expect((await replays.getStorageUsage({}, as)).storageUsedBytes).toBe(0n);
  });

  it("lists a tenant's replays newest first, a page at a time, and shows them to no other tenant", async () => {
    await using s = await replaysOn();
    const { recording, replays, serverId, as } = s;
    const started: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { replayId } = await recording.startRecording({
        serverId,
        integration: "rust",
        startedAt: { seconds: BigInt(1_700_000_000 + i), nanos: 0 },
      });
      await recording.finishRecording({ replayId, sizeBytes: 10n });
      started.push(replayId);
    }

    const route = ReplayListRoute.API;
    const first = await replays.listReplays({ route, pageSize: 2 }, as);
    const second = await replays.listReplays({ route, pageSize: 2, pageToken: first.nextPageToken }, as);
    expect([...first.results, ...second.results].map((r) => r.replayId)).toEqual([...started].reverse());
    expect(second.nextPageToken).toBe("");
    expect(
      await contractCodeOfCall(
        replays.listReplays({ route: ReplayListRoute.SIGNED, pageToken: first.nextPageToken }, as),
      ),
    ).toBe("INVALID_PAGE_TOKEN");

    const stranger = asCaller({ tenantId: randomUUID() });
    expect((await replays.listReplays({ route, pageSize: 10 }, stranger)).results).toEqual([]);
    expect(await contractCodeOfCall(replays.getReplay({ replayId: started[0] ?? "" }, stranger))).toBe(
      "REPLAY_NOT_FOUND",
    );
  });

  it("records only for a connected server", async () => {
    await using s = await replaysOn();
    const { recording, tenantId, db } = s;
    const pending = randomUUID();
    const deauthorised = randomUUID();
    await db.transaction(async (tx) => {
      await store.upsertServerState(tx, { serverId: pending, tenantId, state: "pending" });
      await store.upsertServerState(tx, { serverId: deauthorised, tenantId, state: "deauthorised" });
    });
    const start = (serverId: string) => contractCodeOfCall(recording.startRecording({ serverId, integration: "rust" }));

    expect(await start(pending)).toBe("SERVER_NOT_CONNECTED");
    expect(await start(deauthorised)).toBe("SERVER_DEAUTHORISED");
    expect(await start(randomUUID())).toBe("SERVER_NOT_FOUND");
    expect(await start("not-a-uuid")).toBe("INVALID_SERVER_ID");
  });
});
