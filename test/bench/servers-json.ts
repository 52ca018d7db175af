import { isOnline } from "../../services/servers/status.js";
import type { listServersByTenant } from "../../services/servers/store.js";

type ServerRow = Awaited<ReturnType<typeof listServersByTenant>>[number];

/** The body of GET /v1/api/servers for these rows, in gateway/routes/servers.ts serverEntry's shape. */
export function serversJson(rows: readonly ServerRow[], now: Date): string {
  const servers = rows.map((row) => ({
    id: row.server_id,
    name: row.name,
    status: isOnline(row.state, row.last_seen_at, now) ? "online" : "offline",
    lastSeenAt: row.last_seen_at ? row.last_seen_at.toISOString() : null,
    pluginVersion: row.plugin_version ?? null,
    replayCount: Number(row.replay_count),
    categoryId: row.category_id ?? null,
    state: row.state === "deauthorised" ? "deauthorised" : "connected",
  }));
  return JSON.stringify({ servers });
}
