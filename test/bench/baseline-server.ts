// The gateway benchmark's baseline: one Fastify process answering GET /v1/api/servers with the
// servers service's list query straight through `pg` (same SQL, same JSON, pool of 10), and no
// authentication, rate limit, RPC hop or protobuf. Env: DATABASE_URL, TENANT_ID (whose servers it lists),
// PORT (0 = any). Prints {"port":N} once listening; SIGTERM stops it.
import Fastify from "fastify";
import { createPgDb } from "../../lib/db/db.js";
import { listServersByTenant } from "../../services/servers/store.js";
import { serversJson } from "./servers-json.js";

const { DATABASE_URL: databaseUrl, TENANT_ID: tenantId, PORT: port = "0" } = process.env;
if (!databaseUrl || !tenantId) throw new Error("baseline-server needs DATABASE_URL and TENANT_ID");

// The servers service's own store on a bare pg pool (lib/db/db.ts, the one pg set-up, same default
// size of 10), so the SQL is the service's listServersByTenant by construction, whatever it becomes.
const db = createPgDb({ url: databaseUrl, schema: "servers", poolMax: 10, applicationName: "bench-baseline" });

const app = Fastify();
app.get("/v1/api/servers", async (_req, reply) => {
  const rows = await listServersByTenant(db, tenantId);
  return reply.type("application/json").send(serversJson(rows, new Date()));
});

await app.listen({ port: Number(port), host: "127.0.0.1" });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);
process.once("SIGTERM", () => {
  void app.close().then(() => db.close());
});
