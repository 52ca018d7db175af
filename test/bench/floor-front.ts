// The gateway benchmark's floor, front process: Fastify answering GET /v1/api/servers with the
// bytes of one keep-alive HTTP/1.1 request to floor-back.ts (undici, as the gateway's RPC hop), the
// tenant in a header. Env: BACK_URL, TENANT_ID, PORT (0 = any). Prints {"port":N} once listening;
// SIGTERM stops it.
import Fastify from "fastify";
import { Pool } from "undici";

const { BACK_URL: backUrl, TENANT_ID: tenantId, PORT: port = "0" } = process.env;
if (!backUrl || !tenantId) throw new Error("floor-front needs BACK_URL and TENANT_ID");

// As many connections as the gateway's lean transport allows (lib/rpc/lean-transport.ts).
const pool = new Pool(backUrl, { connections: 256 });
const headers = { "x-tenant-id": tenantId };

const app = Fastify();
app.get("/v1/api/servers", async (_req, reply) => {
  const res = await pool.request({ path: "/", method: "GET", headers });
  const body = Buffer.from(await res.body.arrayBuffer());
  return reply.code(res.statusCode).type("application/json").send(body);
});

await app.listen({ port: Number(port), host: "127.0.0.1" });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);
process.once("SIGTERM", () => {
  void app.close().then(() => pool.close());
});
