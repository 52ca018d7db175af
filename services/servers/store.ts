import type { Db, Tx } from "../../lib/db/types.js";

export type ServerRow = {
  server_id: string;
  tenant_id: string;
  name: string;
  category_id: string | null;
  state: "pending" | "connected" | "deauthorised";
  source_server_id: string | null;
  plugin_version: string | null;
  last_seen_at: Date | null;
  replay_count: number;
  created_at: Date;
};

export type CategoryRow = { category_id: string; tenant_id: string; name: string; created_at: Date };

/** SQL for the `servers` schema, and nothing else. */
export function createServersStore(db: Db) {
  return {
    db,

    async listServersByTenant(tenantId: string): Promise<ServerRow[]> {
      const { rows } = await db.query<ServerRow>(
        `SELECT server_id, tenant_id, name, category_id, state, source_server_id, plugin_version, last_seen_at,
                replay_count, created_at
           FROM servers.server
          WHERE tenant_id = $1 AND state <> 'pending'
          ORDER BY name, server_id`,
        [tenantId],
      );
      return rows;
    },

    /** Slots held: pending setups and connected servers (decisions.md §4). */
    async countSlotsByTenant(tenantId: string): Promise<number> {
      const { rows } = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM servers.server WHERE tenant_id = $1 AND state IN ('pending', 'connected')",
        [tenantId],
      );
      return rows[0]?.n ?? 0;
    },

    async findTenantPlan(tenantId: string): Promise<{ server_limit: number } | undefined> {
      const { rows } = await db.query<{ server_limit: number }>(
        "SELECT server_limit FROM servers.tenant_plan WHERE tenant_id = $1",
        [tenantId],
      );
      return rows[0];
    },

    /** Applies a plan event; an older version than the one held changes nothing. */
    async upsertTenantPlan(tx: Tx, plan: { tenantId: string; serverLimit: number; version: number }): Promise<void> {
      await tx.query(
        `INSERT INTO servers.tenant_plan (tenant_id, server_limit, version) VALUES ($1, $2, $3)
         ON CONFLICT (tenant_id) DO UPDATE SET server_limit = EXCLUDED.server_limit, version = EXCLUDED.version
          WHERE servers.tenant_plan.version < EXCLUDED.version`,
        [plan.tenantId, plan.serverLimit, plan.version],
      );
    },

    async insertCategory(category: { categoryId: string; tenantId: string; name: string }): Promise<CategoryRow> {
      const { rows } = await db.query<CategoryRow>(
        `INSERT INTO servers.category (category_id, tenant_id, name) VALUES ($1, $2, $3)
         RETURNING category_id, tenant_id, name, created_at`,
        [category.categoryId, category.tenantId, category.name],
      );
      return rows[0] as CategoryRow;
    },
  };
}

export type ServersStore = ReturnType<typeof createServersStore>;
