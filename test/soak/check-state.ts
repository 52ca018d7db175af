import type pg from "pg";
import type { Api, Tenant } from "./api.js";
import { type Invariant, invariant, result } from "./invariant.js";
import { acked, type Model, maybe } from "./model.js";

/**
 * The state invariants, read after the system settled: every acknowledged create, delete and
 * transition is in effect (in the owning service's tables, and through the API where a client
 * would look), no marker outlives its replay, and no count kept by one service drifted from what
 * it counts (marker caps, servers used, storage used, replays per server, the projections).
 * The checker reads every schema at once; the rule that a service reads only its own is theirs.
 */
type ReplayRow = {
  replay_id: string;
  tenant_id: string;
  server_id: string;
  status: string;
  pipeline: string;
  size_bytes: string | null;
  visibility: string;
  revoked: boolean;
  archive_key: string | null;
};

export async function checkState(deps: {
  db: pg.Client;
  api: Api;
  tenants: Tenant[];
  model: Model;
  serversUsed(tenantId: string): Promise<number>;
}): Promise<Invariant[]> {
  const { db, model } = deps;
  const rows = async <T extends pg.QueryResultRow>(sql: string) => (await db.query<T>(sql)).rows;
  const replays = new Map(
    (
      await rows<ReplayRow>(
        `SELECT replay_id, tenant_id, server_id, status, pipeline, size_bytes::text, visibility, revoked, archive_key
           FROM replays.replay`,
      )
    ).map((r) => [r.replay_id, r]),
  );
  const markers = await rows<{ marker_id: string; replay_id: string }>(
    "SELECT marker_id, replay_id FROM markers.marker",
  );
  const markerIds = new Set(markers.map((m) => m.marker_id));
  const servers = new Map(
    (
      await rows<{ server_id: string; tenant_id: string; state: string }>(
        "SELECT server_id, tenant_id, state FROM servers.server",
      )
    ).map((s) => [s.server_id, s]),
  );

  const createdInEffect = invariant("acknowledged creates in effect (servers, check-ins, recordings, markers)");
  for (const [serverId, s] of model.servers) {
    const row = servers.get(serverId);
    createdInEffect.check(!!row, () => `server ${serverId} created (201) but not in servers.server`);
    if (s.checkedIn === "ok")
      createdInEffect.check(row?.state === "connected", () => `server ${serverId} checked in but is ${row?.state}`);
  }
  for (const r of model.replays.values()) {
    if (!maybe(r, "delete"))
      createdInEffect.check(
        replays.has(r.replayId),
        () => `replay ${r.replayId} started (OK), never deleted, but gone`,
      );
  }
  for (const m of model.markers) {
    const replay = model.replays.get(m.replayId);
    if (replay && maybe(replay, "delete")) continue;
    createdInEffect.check(
      markerIds.has(m.markerId),
      () => `marker ${m.markerId} on ${m.replayId} created (201) but gone`,
    );
  }

  const transitions = invariant("acknowledged transitions in effect (finish, upload, asset, release, revoke)");
  for (const r of model.replays.values()) {
    const row = replays.get(r.replayId);
    if (!row) continue;
    const expect = (ok: boolean, what: string) =>
      transitions.check(
        ok,
        () =>
          `replay ${r.replayId}: ${what} (status ${row.status}, pipeline ${row.pipeline}, visibility ${row.visibility}, revoked ${row.revoked}, size ${row.size_bytes}, archive ${row.archive_key ? "yes" : "no"})`,
      );
    if (acked(r, "finish"))
      expect(row.status !== "recording" && row.size_bytes === String(r.sizeBytes), "finish acknowledged");
    if (acked(r, "upload"))
      expect(
        row.status !== "recording" && row.archive_key !== null && row.size_bytes === String(r.sizeBytes),
        "upload acknowledged",
      );
    if (acked(r, "processing")) expect(row.pipeline !== "none", "asset processing acknowledged");
    if (acked(r, "ready")) expect(row.status === "ready", "asset ready acknowledged");
    if (acked(r, "failed")) expect(row.status === "failed", "asset failed acknowledged");
    if (acked(r, "release") && !maybe(r, "revoke")) expect(row.visibility === "public", "release acknowledged");
    if (acked(r, "revoke")) expect(row.revoked && row.visibility === "staff", "revoke acknowledged");
  }

  const cancelled = invariant("a cancelled upload changes nothing (the replay stays recording, no archive)");
  for (const r of model.replays.values()) {
    if (r.ops.uploadCancelled !== "ok") continue;
    const row = replays.get(r.replayId);
    cancelled.check(
      !!row && row.status === "recording" && row.archive_key === null,
      () =>
        `replay ${r.replayId}: upload cancelled by the client mid-stream, yet status ${row?.status}, size ${row?.size_bytes}, archive ${row?.archive_key ? "yes" : "no"}`,
    );
  }

  const deletes = invariant("acknowledged deletes in effect (metadata, API, projections)");
  const markersOf = new Map<string, number>();
  for (const m of markers) markersOf.set(m.replay_id, (markersOf.get(m.replay_id) ?? 0) + 1);
  const projections = new Map(
    (
      await rows<{ replay_id: string; deleted: boolean; recording: boolean; marker_count: number }>(
        "SELECT replay_id, deleted, recording, marker_count FROM markers.replay",
      )
    ).map((p) => [p.replay_id, p]),
  );
  const serverReplays = new Map(
    (
      await rows<{ replay_id: string; server_id: string; deleted: boolean }>(
        "SELECT replay_id, server_id, deleted FROM servers.replay",
      )
    ).map((p) => [p.replay_id, p]),
  );
  const tenantOf = new Map(deps.tenants.map((t) => [t.tenantId, t]));
  for (const r of model.replays.values()) {
    if (!acked(r, "delete")) continue;
    deletes.check(!replays.has(r.replayId), () => `replay ${r.replayId} deleted (204) but still in replays.replay`);
    const res = await deps.api.getReplay(tenantOf.get(r.tenantId) as Tenant, r.replayId);
    deletes.check(
      res.value?.status === 404,
      () => `replay ${r.replayId} deleted (204) but GET answers ${res.value?.status}`,
    );
    deletes.check(
      projections.get(r.replayId)?.deleted !== false,
      () => `replay ${r.replayId} deleted but markers' projection says it exists`,
    );
    deletes.check(
      serverReplays.get(r.replayId)?.deleted !== false,
      () => `replay ${r.replayId} deleted but servers' projection still counts it`,
    );
  }

  const orphans = invariant("no marker outlives its replay");
  for (const [replayId, n] of markersOf)
    orphans.check(replays.has(replayId), () => `${n} marker(s) on replay ${replayId}, which no longer exists`);

  const idempotent = invariant("one marker per Idempotency-Key (every acknowledged answer names it)");
  for (const [key, ids] of model.keyedAnswers)
    idempotent.check(
      ids.size === 1,
      () => `key ${key} answered with ${ids.size} different markers: ${[...ids].join(", ")}`,
    );

  const drift = invariant(
    "no count drifted (marker caps, servers used, storage used, replays per server, projections)",
  );
  for (const [replayId, p] of projections) {
    const actual = markersOf.get(replayId) ?? 0;
    drift.check(
      p.marker_count === actual,
      () => `markers.replay ${replayId}: marker_count ${p.marker_count}, ${actual} markers`,
    );
    const row = replays.get(replayId);
    if (row) {
      drift.check(!p.deleted, () => `markers' projection has replay ${replayId} deleted; it exists`);
      drift.check(
        p.recording === (row.status === "recording"),
        () => `markers' projection: replay ${replayId} recording=${p.recording}, status ${row.status}`,
      );
    } else if (model.replays.has(replayId)) {
      drift.check(p.deleted, () => `markers' projection has replay ${replayId} live; it was deleted`);
    }
  }
  const perServer = new Map<string, number>();
  for (const row of replays.values()) perServer.set(row.server_id, (perServer.get(row.server_id) ?? 0) + 1);
  const projectedPerServer = new Map<string, number>();
  for (const p of serverReplays.values())
    if (!p.deleted) projectedPerServer.set(p.server_id, (projectedPerServer.get(p.server_id) ?? 0) + 1);
  for (const serverId of servers.keys()) {
    const actual = perServer.get(serverId) ?? 0;
    const counted = projectedPerServer.get(serverId) ?? 0;
    drift.check(actual === counted, () => `server ${serverId}: replayCount ${counted}, ${actual} replays`);
  }
  const usage = await rows<{ tenant_id: string; used: string; actual: string }>(
    `SELECT t.tenant_id, t.storage_used_bytes::text AS used,
            COALESCE((SELECT sum(size_bytes) FROM replays.replay r
                       WHERE r.tenant_id = t.tenant_id AND r.status NOT IN ('recording', 'expired')), 0)::text AS actual
       FROM replays.tenant t`,
  );
  for (const u of usage)
    drift.check(
      u.used === u.actual,
      () => `tenant ${u.tenant_id}: storage_used_bytes ${u.used}, replays hold ${u.actual}`,
    );
  for (const t of deps.tenants) {
    const used = await deps.serversUsed(t.tenantId);
    const actual = [...servers.values()].filter((s) => s.tenant_id === t.tenantId).length;
    drift.check(used === actual, () => `tenant ${t.tenantId}: serversUsed ${used}, ${actual} servers`);
  }

  return [createdInEffect, transitions, cancelled, deletes, orphans, idempotent, drift].map(result);
}
