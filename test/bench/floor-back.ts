// The gateway benchmark's floor, back process: node:http answering the servers list query through
// `pg` (the servers service's own store, as the baseline) with the JSON body, the tenant named by a
// header. With floor-front.ts it is the least two processes can do for GET /v1/api/servers: no
// authentication, RPC protocol, protobuf or metrics. Env: DATABASE_URL, PORT (0 = any). Prints
// {"port":N} once listening; SIGTERM stops it.
import { createServer } from "node:http";
import { createPgDb } from "../../lib/db/db.js";
import { listServersByTenant } from "../../services/servers/store.js";
import { serversJson } from "./servers-json.js";

const { DATABASE_URL: databaseUrl, PORT: port = "0" } = process.env;
if (!databaseUrl) throw new Error("floor-back needs DATABASE_URL");

const db = createPgDb({ url: databaseUrl, schema: "servers", poolMax: 10, applicationName: "bench-floor" });

const server = createServer((req, res) => {
  listServersByTenant(db, String(req.headers["x-tenant-id"])).then(
    (rows) => {
      const body = serversJson(rows, new Date());
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
    },
    () => res.writeHead(500).end(),
  );
});
server.listen(Number(port), "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
process.once("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  void db.close();
});
