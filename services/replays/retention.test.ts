import { randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createContextValues } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDb, testDbModes } from "../../lib/db/_testing.js";
import { plansOf, serversFromProjection } from "./_testing.js";
import { createRecordingService } from "./recording-service.js";
import { retentionWorker } from "./retention.js";
import { findTenantStorage, upsertServerState, upsertTenantPlan } from "./store.js";

// The retention reaper on the real schema: hot to cold after the hot period, expiry at
// retention_until through ExpireReplay's transition, once, however many replicas run rounds at once.

const NOW = new Date("2026-06-01T00:00:00.000Z");
const DAY = 24 * 60 * 60 * 1000;
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const signal = new AbortController().signal;

describe.each(testDbModes())("retention worker ($name database)", ({ open }) => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await open("replays");
  });
  afterAll(async () => {
    await testDb[Symbol.asyncDispose]();
  });

  const worker = (batchSize = 50) => retentionWorker({ db: testDb.db, now: () => NOW, batchSize });

  async function seed(
    tenantId: string,
    s: { status?: string; startedAt: Date; retentionUntil: Date; sizeBytes?: number; hotUntil?: Date },
  ): Promise<string> {
    const replayId = randomUUID();
    const recording = s.status === "recording";
    await testDb.db.query(
      `INSERT INTO replays.replay (replay_id, tenant_id, server_id, integration, quality, status, pipeline,
         started_at, ended_at, duration_ms, size_bytes, format_version, storage_tier, retention_until, visibility,
         archive_key, hot_until)
       VALUES ($1, $2, $3, 'rust', 'standard', $4, $5, $6, $7, $8, $9, $10, 'hot', $11, 'staff', $12, $13)`,
      [
        replayId,
        tenantId,
        randomUUID(),
        s.status ?? "ready",
        recording ? "none" : "ended",
        s.startedAt,
        recording ? null : new Date(s.startedAt.getTime() + 5_000),
        recording ? null : 5_000,
        recording ? null : (s.sizeBytes ?? 1_000),
        recording ? null : 1,
        s.retentionUntil,
        recording ? null : `tenant/${tenantId}/replay/${replayId}.rpl`,
        s.hotUntil ?? new Date(s.startedAt.getTime() + 30 * DAY),
      ],
    );
    return replayId;
  }

  const setUsed = (tenantId: string, used: number) =>
    testDb.db.query(
      `INSERT INTO replays.tenant (tenant_id, storage_quota_bytes, plan_version, storage_used_bytes)
       VALUES ($1, 1000000, 1, $2)`,
      [tenantId, used],
    );

  const replay = async (replayId: string) => {
    const { rows } = await testDb.db.query<{ status: string; storage_tier: string; archive_key: string | null }>(
      "SELECT status, storage_tier, archive_key FROM replays.replay WHERE replay_id = $1",
      [replayId],
    );
    return rows[0];
  };
  // The asset payload carries the replay id as a protobuf string, so its bytes are in the payload.
  const expiredEvents = async (replayId: string) => {
    const { rows } = await testDb.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM replays.outbox
        WHERE subject = 'replays.asset.expired' AND position(convert_to($1, 'UTF8') IN payload) > 0`,
      [replayId],
    );
    return rows[0]?.n;
  };
  const queuedForRemoval = async (key: string) => {
    const { rows } = await testDb.db.query("SELECT 1 FROM replays.blob_deletion WHERE archive_key = $1", [key]);
    return rows.length;
  };

  it("expires each due replay once, with one event, while three replicas run rounds at once", async () => {
    const tenantId = randomUUID();
    const due = await Promise.all(
      [1, 2, 3, 4, 5].map((i) => seed(tenantId, { startedAt: ago(100 * DAY), retentionUntil: ago(i * 1_000) })),
    );
    await setUsed(tenantId, 5_500);
    const replicas = [worker(2), worker(2), worker(2)];
    for (let more = true; more; ) {
      const results = await Promise.all(replicas.map((w) => w.round(signal)));
      more = results.some(Boolean);
    }
    for (const replayId of due) {
      expect(await replay(replayId)).toMatchObject({ status: "expired", archive_key: null });
      expect(await expiredEvents(replayId)).toBe(1);
      expect(await queuedForRemoval(`tenant/${tenantId}/replay/${replayId}.rpl`)).toBe(1);
    }
    // decisions.md §5: expiry frees the archives' size at once.
    expect((await findTenantStorage(testDb.db, tenantId))?.storage_used_bytes).toBe(500n);
    // Another round finds nothing left to do: no second event.
    await worker().round(signal);
    for (const replayId of due) expect(await expiredEvents(replayId)).toBe(1);
  });

  it("leaves a replay whose retention has not passed, and never expires a recording in progress", async () => {
    const tenantId = randomUUID();
    const notDue = await seed(tenantId, { startedAt: ago(10 * DAY), retentionUntil: new Date(NOW.getTime() + 1_000) });
    const recording = await seed(tenantId, {
      status: "recording",
      startedAt: ago(200 * DAY),
      retentionUntil: ago(DAY),
    });
    await setUsed(tenantId, 1_000);
    await worker().round(signal);
    expect(await replay(notDue)).toMatchObject({ status: "ready", storage_tier: "hot" });
    expect(await replay(recording)).toMatchObject({ status: "recording", storage_tier: "hot" });
    expect(await expiredEvents(notDue)).toBe(0);
    expect(await expiredEvents(recording)).toBe(0);
    expect((await findTenantStorage(testDb.db, tenantId))?.storage_used_bytes).toBe(1_000n);
  });

  it("moves a finished replay from hot to cold once its hot_until has passed", async () => {
    const tenantId = randomUUID();
    const later = new Date(NOW.getTime() + 60 * DAY);
    // hot_until comes from the plan's hot period when the recording starts (test/recording.test.ts).
    const old = await seed(tenantId, { startedAt: ago(2 * DAY), hotUntil: NOW, retentionUntil: later });
    const young = await seed(tenantId, { startedAt: ago(40 * DAY), hotUntil: ago(-1_000), retentionUntil: later });
    const failed = await seed(tenantId, { status: "failed", startedAt: ago(40 * DAY), retentionUntil: later });
    const recording = await seed(tenantId, { status: "recording", startedAt: ago(40 * DAY), retentionUntil: later });
    await worker().round(signal);
    expect(await replay(old)).toMatchObject({ status: "ready", storage_tier: "cold" });
    expect(await replay(young)).toMatchObject({ status: "ready", storage_tier: "hot" });
    expect(await replay(failed)).toMatchObject({ status: "failed", storage_tier: "cold" });
    expect(await replay(recording)).toMatchObject({ status: "recording", storage_tier: "hot" });
    expect(await expiredEvents(old)).toBe(0);
  });

  it("gives each replay its tenant's plan periods when it starts, and cools it after its plan's hot period", async () => {
    const recording = createRecordingService({
      db: testDb.db,
      blobs: undefined as never,
      now: () => NOW,
      lookupServer: serversFromProjection(testDb.db),
      lookupPlan: plansOf(),
    });
    // Two tenants' plans as identity.tenant.upserted projects them: kept 10 days (2 hot), and 1 day.
    const plans = [
      { retentionDays: 10, hotDays: 2 },
      { retentionDays: 1, hotDays: 1 },
    ];
    const started = ago(3 * DAY);
    const replayIds: string[] = [];
    for (const plan of plans) {
      const tenantId = randomUUID();
      const serverId = randomUUID();
      await testDb.db.transaction(async (tx) => {
        await upsertTenantPlan(tx, { tenantId, storageQuotaBytes: 1_000_000n, version: 1n, ...plan });
        await upsertServerState(tx, { serverId, tenantId, state: "connected" });
      });
      const start = { serverId, integration: "rust", startedAt: timestampFromDate(started) };
      // A handler context with no values: an RPC that brought no trusted context.
      const ctx = { values: createContextValues() } as never;
      const replayId = String((await recording.startRecording(start as never, ctx)).replayId);
      await recording.finishRecording({ replayId, sizeBytes: 10n } as never, ctx);
      replayIds.push(replayId);
    }
    const [twoDaysHot, oneDayKept] = replayIds as [string, string];
    const { rows } = await testDb.db.query<{ replay_id: string; retention_until: Date; hot_until: Date }>(
      "SELECT replay_id, retention_until, hot_until FROM replays.replay WHERE replay_id = ANY($1)",
      [replayIds],
    );
    const byId = new Map(rows.map((r) => [r.replay_id, r]));
    expect(byId.get(twoDaysHot)?.retention_until.getTime()).toBe(started.getTime() + 10 * DAY);
    expect(byId.get(twoDaysHot)?.hot_until.getTime()).toBe(started.getTime() + 2 * DAY);
    expect(byId.get(oneDayKept)?.retention_until.getTime()).toBe(started.getTime() + DAY);
    // One round at NOW, 3 days after the start: the 2-day-hot replay is cold (and kept), the
    // 1-day-kept one expired.
    await worker().round(signal);
    expect(await replay(twoDaysHot)).toMatchObject({ status: "processing", storage_tier: "cold" });
    expect(await replay(oneDayKept)).toMatchObject({ status: "expired" });
  });
});
