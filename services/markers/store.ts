import type { Queryable, Tx } from "../../lib/db/types.js";
import type { MarkerInput } from "./marker.js";

// SQL of schema `markers`: markers, idempotency records, and the projections of replays and servers.

/** A stored marker; the optional fields are MarkerInput's, under the same names. */
export type MarkerRow = { marker_id: string; replay_id: string; created_at: Date } & Omit<MarkerInput, "target">;

const markerColumns = "marker_id, replay_id, tick::float8 AS tick, label, category, colour, icon, actor, created_at";

export type ReplayRow = { replay_id: string; deleted: boolean; marker_count: number };

/** Locked for the transaction: the row creates, marker deletes and the delete consumer serialise on. */
export async function findReplayForUpdate(tx: Tx, tenantId: string, replayId: string): Promise<ReplayRow | undefined> {
  const { rows } = await tx.query<ReplayRow>(
    `SELECT replay_id, deleted, marker_count FROM markers.replay
      WHERE replay_id = $1 AND tenant_id = $2 FOR UPDATE`,
    [replayId, tenantId],
  );
  return rows[0];
}

export async function listMarkersByReplay(q: Queryable, tenantId: string, replayId: string): Promise<MarkerRow[]> {
  const { rows } = await q.query<MarkerRow>(
    `SELECT ${markerColumns} FROM markers.marker
      WHERE replay_id = $1 AND tenant_id = $2
      ORDER BY tick, created_at, marker_id`,
    [replayId, tenantId],
  );
  return rows;
}

export async function findMarkerReplay(q: Queryable, tenantId: string, markerId: string): Promise<string | undefined> {
  const { rows } = await q.query<{ replay_id: string }>(
    "SELECT replay_id FROM markers.marker WHERE marker_id = $1 AND tenant_id = $2",
    [markerId, tenantId],
  );
  return rows[0]?.replay_id;
}

/** Frees the marker's place under the cap; the caller holds its replay's row locked. False: gone already. */
export async function deleteMarker(tx: Tx, tenantId: string, markerId: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    `WITH gone AS (DELETE FROM markers.marker WHERE marker_id = $1 AND tenant_id = $2 RETURNING replay_id)
     UPDATE markers.replay r SET marker_count = r.marker_count - 1 FROM gone WHERE r.replay_id = gone.replay_id`,
    [markerId, tenantId],
  );
  return rowCount > 0;
}

/** An idempotency record: the request's fingerprint and, once the create committed, its marker. */
export type IdempotencyRow = { fingerprint: string; marker: MarkerRow | null };

/** False when a live record holds it; a concurrent claim waits on this row, then sees its record or a free key. */
export async function claimIdempotencyKey(
  tx: Tx,
  claim: { tenantId: string; key: string; fingerprint: string; now: Date; expiredBefore: Date },
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO markers.idempotency (tenant_id, idempotency_key, fingerprint, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant_id, idempotency_key) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, marker = NULL
       WHERE markers.idempotency.created_at < $5`,
    [claim.tenantId, claim.key, claim.fingerprint, claim.now, claim.expiredBefore],
  );
  return rowCount === 1;
}

export async function findIdempotencyRecord(
  q: Queryable,
  tenantId: string,
  key: string,
): Promise<IdempotencyRow | undefined> {
  const { rows } = await q.query<{
    fingerprint: string;
    marker: (Omit<MarkerRow, "created_at"> & { created_at: string }) | null;
  }>("SELECT fingerprint, marker FROM markers.idempotency WHERE tenant_id = $1 AND idempotency_key = $2", [
    tenantId,
    key,
  ]);
  const row = rows[0];
  if (!row) return undefined;
  return {
    fingerprint: row.fingerprint,
    marker: row.marker ? { ...row.marker, created_at: new Date(row.marker.created_at) } : null,
  };
}

export async function recordIdempotentMarker(tx: Tx, tenantId: string, key: string, marker: MarkerRow): Promise<void> {
  await tx.query("UPDATE markers.idempotency SET marker = $3 WHERE tenant_id = $1 AND idempotency_key = $2", [
    tenantId,
    key,
    JSON.stringify({ ...marker, created_at: marker.created_at.toISOString() }),
  ]);
}

export async function deleteIdempotencyExpired(q: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM markers.idempotency WHERE ctid IN (
       SELECT ctid FROM markers.idempotency WHERE created_at < $1 ORDER BY created_at LIMIT $2)`,
    [before, limit],
  );
  return rowCount;
}

/** replays.recording.started: the replay exists and records, unless its finish or delete came first. */
export async function upsertReplayStarted(
  tx: Tx,
  replay: { replayId: string; tenantId: string; serverId: string; startedAt: Date | null },
): Promise<void> {
  await tx.query(
    `INSERT INTO markers.replay (replay_id, tenant_id, server_id, started_at, recording)
     VALUES ($1, $2, $3, $4, true)
     ON CONFLICT (replay_id) DO UPDATE
       SET started_at = COALESCE(markers.replay.started_at, EXCLUDED.started_at),
           recording = NOT markers.replay.finished AND NOT markers.replay.deleted`,
    [replay.replayId, replay.tenantId, replay.serverId, replay.startedAt],
  );
}

/** From the owner's answer (replay-owner.ts); an existing row, a tombstone above all, stays as it is. */
export async function insertReplayKnown(
  q: Queryable,
  replay: { replayId: string; tenantId: string; serverId: string; startedAt: Date | null; recording: boolean },
): Promise<void> {
  await q.query(
    `INSERT INTO markers.replay (replay_id, tenant_id, server_id, started_at, recording, finished)
     VALUES ($1, $2, $3, $4, $5, NOT $5)
     ON CONFLICT (replay_id) DO NOTHING`,
    [replay.replayId, replay.tenantId, replay.serverId, replay.startedAt, replay.recording],
  );
}

/** replays.recording.finished: the replay exists and no longer records, whichever event came first. */
export async function upsertReplayFinished(
  tx: Tx,
  replay: { replayId: string; tenantId: string; serverId: string; startedAt: Date | null },
): Promise<void> {
  await tx.query(
    `INSERT INTO markers.replay (replay_id, tenant_id, server_id, started_at, finished)
     VALUES ($1, $2, $3, $4, true)
     ON CONFLICT (replay_id) DO UPDATE
       SET started_at = COALESCE(markers.replay.started_at, EXCLUDED.started_at), finished = true, recording = false`,
    [replay.replayId, replay.tenantId, replay.serverId, replay.startedAt],
  );
}

/**
 * The row is written (so locked) first: a create holding it committed its marker before the DELETE sees it,
 * and a later create finds the tombstone.
 */
export async function deleteReplay(
  tx: Tx,
  replay: { replayId: string; tenantId: string; serverId: string },
): Promise<void> {
  await tx.query(
    `INSERT INTO markers.replay (replay_id, tenant_id, server_id, deleted) VALUES ($1, $2, $3, true)
     ON CONFLICT (replay_id) DO UPDATE SET deleted = true, recording = false, marker_count = 0`,
    [replay.replayId, replay.tenantId, replay.serverId],
  );
  await tx.query("DELETE FROM markers.marker WHERE replay_id = $1", [replay.replayId]);
}

export type ServerState = "pending" | "connected" | "deauthorised" | "purged";

/** A server only moves forward, so an event that arrives after a later one changes nothing. */
export async function upsertServerState(
  tx: Tx,
  server: { serverId: string; tenantId: string; state: ServerState },
): Promise<void> {
  await tx.query(
    `INSERT INTO markers.server (server_id, tenant_id, state) VALUES ($1, $2, $3)
     ON CONFLICT (server_id) DO UPDATE SET state = EXCLUDED.state
       WHERE array_position(ARRAY['pending', 'connected', 'deauthorised', 'purged'], markers.server.state)
           < array_position(ARRAY['pending', 'connected', 'deauthorised', 'purged'], EXCLUDED.state)`,
    [server.serverId, server.tenantId, server.state],
  );
}

export type NewMarker = {
  markerId: string;
  tenantId: string;
  replayId: string;
  serverId: string | null;
  createdAt: Date;
} & Omit<MarkerInput, "target">;

/** What became of one create of a batch: inserted, refused for the cap, or its replay is unknown or deleted. */
export type BatchOutcome = "created" | "full" | "missing";

/**
 * One statement, as if the creates ran one after another. Replay rows are locked in id order (batches never
 * deadlock) and read after the lock, so a replay deleted meanwhile is missing and the cap stays exact.
 */
export async function insertMarkers(q: Queryable, markers: readonly NewMarker[], cap: number): Promise<BatchOutcome[]> {
  const { rows } = await q.query<{ outcome: BatchOutcome }>(
    `WITH input AS (
       SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::int8[], $6::text[], $7::text[],
                            $8::text[], $9::text[], $10::text[], $11::timestamptz[])
         WITH ORDINALITY AS i (marker_id, tenant_id, replay_id, server_id, tick, label, category, colour, icon, actor,
                               created_at, ord)
     ), locked AS MATERIALIZED (
       SELECT r.replay_id, r.tenant_id, r.marker_count
         FROM markers.replay r JOIN (SELECT DISTINCT replay_id FROM input) wanted USING (replay_id)
        WHERE NOT r.deleted
        ORDER BY r.replay_id
          FOR UPDATE OF r
     ), ranked AS MATERIALIZED (
       SELECT i.*, l.marker_count + row_number() OVER (PARTITION BY i.replay_id ORDER BY i.ord) AS position
         FROM input i JOIN locked l ON l.replay_id = i.replay_id AND l.tenant_id = i.tenant_id
     ), accepted AS MATERIALIZED (
       SELECT * FROM ranked WHERE position <= $12
     ), counted AS (
       UPDATE markers.replay r SET marker_count = r.marker_count + a.n
         FROM (SELECT replay_id, count(*)::int AS n FROM accepted GROUP BY replay_id) a
        WHERE r.replay_id = a.replay_id
     ), inserted AS (
       INSERT INTO markers.marker
         (marker_id, tenant_id, replay_id, server_id, tick, label, category, colour, icon, actor, created_at)
       SELECT marker_id, tenant_id, replay_id, server_id, tick, label, category, colour, icon, actor, created_at
         FROM accepted
       RETURNING marker_id
     )
     SELECT CASE WHEN ins.marker_id IS NOT NULL THEN 'created' WHEN r.ord IS NOT NULL THEN 'full' ELSE 'missing' END
              AS outcome
       FROM input i LEFT JOIN ranked r ON r.ord = i.ord LEFT JOIN inserted ins ON ins.marker_id = i.marker_id
      ORDER BY i.ord`,
    [
      markers.map((m) => m.markerId),
      markers.map((m) => m.tenantId),
      markers.map((m) => m.replayId),
      markers.map((m) => m.serverId),
      markers.map((m) => String(m.tick)),
      markers.map((m) => m.label),
      markers.map((m) => m.category),
      markers.map((m) => m.colour),
      markers.map((m) => m.icon),
      markers.map((m) => m.actor),
      markers.map((m) => m.createdAt),
      cap,
    ],
  );
  return rows.map((row) => row.outcome);
}
