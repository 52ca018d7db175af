import type { OutgoingEvent } from "../../lib/bus/events.js";
import { enqueue } from "../../lib/bus/outbox.js";
import type { Queryable, Tx } from "../../lib/db/types.js";
import type { CheckIn } from "./checkin.js";

export type ServerState = "pending" | "connected" | "deauthorised";

export type ServerRow = {
  server_id: string;
  tenant_id: string;
  name: string;
  category_id: string | null;
  state: ServerState;
  source_server_id: string | null;
  plugin_version: string | null;
  last_seen_at: Date | null;
  replay_count: number;
  created_at: Date;
};

export type CategoryRow = { category_id: string; tenant_id: string; name: string; created_at: Date };

// replay_count is derived from the replay projection, so it can never drift from it.
const serverColumns = `s.server_id, s.tenant_id, s.name, s.category_id, s.state, s.source_server_id, s.plugin_version,
  s.last_seen_at, s.created_at,
  (SELECT count(*) FROM servers.replay r WHERE r.server_id = s.server_id AND NOT r.deleted)::int8 AS replay_count`;

export function enqueueEvent(tx: Tx, event: OutgoingEvent): Promise<void> {
  return enqueue(tx, "servers", event);
}

export async function listServersByTenant(q: Queryable, tenantId: string): Promise<ServerRow[]> {
  const { rows } = await q.query<ServerRow>(
    `SELECT ${serverColumns} FROM servers.server s
      WHERE s.tenant_id = $1 AND s.state <> 'pending'
      ORDER BY s.name, s.server_id`,
    [tenantId],
  );
  return rows;
}

export async function listPendingByTenant(q: Queryable, tenantId: string): Promise<ServerRow[]> {
  const { rows } = await q.query<ServerRow>(
    `SELECT ${serverColumns} FROM servers.server s
      WHERE s.tenant_id = $1 AND s.state = 'pending'
      ORDER BY s.created_at, s.server_id`,
    [tenantId],
  );
  return rows;
}

/** One server of a tenant, locked for the rest of the transaction when `q` is one. */
export async function findServerById(
  q: Queryable,
  tenantId: string,
  serverId: string,
  lock = false,
): Promise<ServerRow | undefined> {
  const { rows } = await q.query<ServerRow>(
    `SELECT ${serverColumns} FROM servers.server s
      WHERE s.tenant_id = $1 AND s.server_id = $2 ${lock ? "FOR UPDATE OF s" : ""}`,
    [tenantId, serverId],
  );
  return rows[0];
}

/** A server by id alone: recorders know their server id, not their tenant. */
export async function findServerForCheckIn(
  q: Queryable,
  serverId: string,
  lock = false,
): Promise<ServerRow | undefined> {
  const { rows } = await q.query<ServerRow>(
    `SELECT ${serverColumns} FROM servers.server s WHERE s.server_id = $1 ${lock ? "FOR UPDATE OF s" : ""}`,
    [serverId],
  );
  return rows[0];
}

/** By id alone: what other services look up (lookup-service.ts). */
export async function findServerState(
  q: Queryable,
  serverId: string,
): Promise<{ tenant_id: string; state: ServerState } | undefined> {
  const { rows } = await q.query<{ tenant_id: string; state: ServerState }>(
    "SELECT tenant_id, state FROM servers.server WHERE server_id = $1",
    [serverId],
  );
  return rows[0];
}

/** Every heartbeat's common case, one statement; undefined when the server is not connected. */
export async function updateServerSeen(
  q: Queryable,
  serverId: string,
  at: Date,
  pluginVersion: string,
): Promise<{ tenant_id: string; last_seen_at: Date } | undefined> {
  const { rows } = await q.query<{ tenant_id: string; last_seen_at: Date }>(
    `UPDATE servers.server
        SET last_seen_at = $2, plugin_version = COALESCE(NULLIF($3, ''), plugin_version), updated_at = now()
      WHERE server_id = $1 AND state = 'connected'
     RETURNING tenant_id, last_seen_at`,
    [serverId, at, pluginVersion],
  );
  return rows[0];
}

/** Rows locked in id order (batches never deadlock); arrays via scalar subqueries (docs/engineering.md). */
export async function updateServersSeen(q: Queryable, checkIns: readonly CheckIn[]): Promise<Set<string>> {
  const { rows } = await q.query<{ server_id: string }>(
    `WITH seen AS (
       SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::timestamptz[]), (SELECT $3::text[]))
                  AS c (server_id, at, plugin_version)
     ), locked AS MATERIALIZED (
       SELECT s.server_id FROM servers.server s JOIN seen USING (server_id)
        WHERE s.state = 'connected'
        ORDER BY s.server_id
          FOR UPDATE OF s
     )
     UPDATE servers.server s
        SET last_seen_at = seen.at, plugin_version = COALESCE(NULLIF(seen.plugin_version, ''), s.plugin_version),
            updated_at = now()
       FROM locked JOIN seen USING (server_id)
      WHERE s.server_id = locked.server_id AND s.state = 'connected'
     RETURNING s.server_id`,
    [checkIns.map((c) => c.serverId), checkIns.map((c) => c.at), checkIns.map((c) => c.pluginVersion)],
  );
  return new Set(rows.map((row) => row.server_id));
}

export async function updateServerConnected(tx: Tx, serverId: string, at: Date, pluginVersion: string): Promise<void> {
  await tx.query(
    `UPDATE servers.server
        SET state = 'connected', last_seen_at = $2, plugin_version = NULLIF($3, ''), updated_at = now()
      WHERE server_id = $1 AND state = 'pending'`,
    [serverId, at, pluginVersion],
  );
}

/** Slots held: pending setups and connected servers (decisions.md §4). */
export async function countSlotsByTenant(q: Queryable, tenantId: string): Promise<number> {
  const { rows } = await q.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM servers.server WHERE tenant_id = $1 AND state IN ('pending', 'connected')",
    [tenantId],
  );
  return rows[0]?.n ?? 0;
}

/** The tenant's plan, locked so that concurrent creates count slots one after another. */
export async function findTenantPlan(
  q: Queryable,
  tenantId: string,
  lock = false,
): Promise<{ server_limit: number } | undefined> {
  const { rows } = await q.query<{ server_limit: number }>(
    `SELECT server_limit FROM servers.tenant_plan WHERE tenant_id = $1 ${lock ? "FOR UPDATE" : ""}`,
    [tenantId],
  );
  return rows[0];
}

/** Applies a plan event; an older version than the one held changes nothing. */
export async function upsertTenantPlan(
  tx: Tx,
  plan: { tenantId: string; serverLimit: number; version: number },
): Promise<void> {
  await tx.query(
    `INSERT INTO servers.tenant_plan (tenant_id, server_limit, version) VALUES ($1, $2, $3)
     ON CONFLICT (tenant_id) DO UPDATE SET server_limit = EXCLUDED.server_limit, version = EXCLUDED.version
      WHERE servers.tenant_plan.version < EXCLUDED.version`,
    [plan.tenantId, plan.serverLimit, plan.version],
  );
}

export async function insertServer(
  tx: Tx,
  server: {
    serverId: string;
    tenantId: string;
    name: string;
    categoryId: string | null;
    sourceServerId: string | null;
  },
): Promise<ServerRow> {
  const { rows } = await tx.query<ServerRow>(
    `INSERT INTO servers.server (server_id, tenant_id, name, category_id, state, source_server_id)
     VALUES ($1, $2, $3, $4, 'pending', $5)
     RETURNING server_id, tenant_id, name, category_id, state, source_server_id, plugin_version, last_seen_at,
               created_at, 0::int8 AS replay_count`,
    [server.serverId, server.tenantId, server.name, server.categoryId, server.sourceServerId],
  );
  return rows[0] as ServerRow;
}

export async function updateServerName(tx: Tx, serverId: string, name: string): Promise<void> {
  await tx.query("UPDATE servers.server SET name = $2, updated_at = now() WHERE server_id = $1", [serverId, name]);
}

export async function updateServerDeauthorised(tx: Tx, serverId: string): Promise<void> {
  await tx.query(
    "UPDATE servers.server SET state = 'deauthorised', updated_at = now() WHERE server_id = $1 AND state = 'connected'",
    [serverId],
  );
}

export async function deleteServer(tx: Tx, serverId: string): Promise<void> {
  await tx.query("DELETE FROM servers.server WHERE server_id = $1", [serverId]);
}

export async function findCategoryById(
  q: Queryable,
  tenantId: string,
  categoryId: string,
): Promise<CategoryRow | undefined> {
  const { rows } = await q.query<CategoryRow>(
    "SELECT category_id, tenant_id, name, created_at FROM servers.category WHERE tenant_id = $1 AND category_id = $2",
    [tenantId, categoryId],
  );
  return rows[0];
}

export async function insertCategory(
  q: Queryable,
  category: { categoryId: string; tenantId: string; name: string },
): Promise<CategoryRow> {
  const { rows } = await q.query<CategoryRow>(
    `INSERT INTO servers.category (category_id, tenant_id, name) VALUES ($1, $2, $3)
     RETURNING category_id, tenant_id, name, created_at`,
    [category.categoryId, category.tenantId, category.name],
  );
  return rows[0] as CategoryRow;
}

/** `after` null: from the start. */
export async function listCategoriesByTenant(
  q: Queryable,
  tenantId: string,
  page: { after: string | null; limit: number },
): Promise<CategoryRow[]> {
  const { rows } = await q.query<CategoryRow>(
    `SELECT category_id, tenant_id, name, created_at FROM servers.category
      WHERE tenant_id = $1
        AND ($2::uuid IS NULL OR (created_at, category_id) >
             (SELECT created_at, category_id FROM servers.category WHERE tenant_id = $1 AND category_id = $2))
      ORDER BY created_at, category_id
      LIMIT $3`,
    [tenantId, page.after, page.limit],
  );
  return rows;
}

/** replays.recording.started: the replay exists (unless its delete was seen first). */
export async function insertReplay(tx: Tx, replayId: string, serverId: string): Promise<void> {
  await tx.query(
    "INSERT INTO servers.replay (replay_id, server_id) VALUES ($1, $2) ON CONFLICT (replay_id) DO NOTHING",
    [replayId, serverId],
  );
}

/** replays.replay.deleted: the replay no longer counts, whichever event came first. */
export async function updateReplayDeleted(tx: Tx, replayId: string, serverId: string): Promise<void> {
  await tx.query(
    `INSERT INTO servers.replay (replay_id, server_id, deleted) VALUES ($1, $2, true)
     ON CONFLICT (replay_id) DO UPDATE SET deleted = true`,
    [replayId, serverId],
  );
}
