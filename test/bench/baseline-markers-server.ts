// The markers benchmark's baseline: one Fastify process answering POST /v1/api/timeline-events with
// the same body handling and validation as the gateway and the markers service (the same functions:
// markerRequestOf, parseMarkerInput) and a single INSERT into markers.marker through `pg` (pool of
// 10), returning the same JSON. No authentication, rate limit, RPC hop, protobuf, existence check,
// cap or transaction. Env: DATABASE_URL, PORT (0 = any). Prints {"port":N} once listening; SIGTERM stops it.
import { randomUUID } from "node:crypto";
import Fastify from "fastify";
import { markerRequestOf } from "../../gateway/routes/markers.js";
import { createPgDb } from "../../lib/db/db.js";
import { DomainError } from "../../lib/errors.js";
import { parseMarkerInput } from "../../services/markers/marker.js";

const { DATABASE_URL: databaseUrl, PORT: port = "0" } = process.env;
if (!databaseUrl) throw new Error("baseline-markers-server needs DATABASE_URL");

const db = createPgDb({ url: databaseUrl, schema: "markers", poolMax: 10, applicationName: "bench-baseline" });
// The baseline's tenant: the rows need one, and nothing reads them back.
const tenantId = randomUUID();

const app = Fastify();
app.post("/v1/api/timeline-events", async (req, reply) => {
  try {
    const input = parseMarkerInput(markerRequestOf(req.body as Record<string, unknown>));
    const markerId = randomUUID();
    const createdAt = new Date();
    await db.query(
      `INSERT INTO markers.marker (marker_id, tenant_id, replay_id, tick, label, category, colour, icon, actor, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        markerId,
        tenantId,
        input.target.replayId,
        input.tick,
        input.label,
        input.category,
        input.colour,
        input.icon,
        input.actor,
        createdAt,
      ],
    );
    return reply
      .code(201)
      .type("application/json")
      .send(
        JSON.stringify({
          id: markerId,
          replayId: input.target.replayId,
          tick: input.tick,
          label: input.label,
          category: input.category,
          colour: input.colour,
          icon: input.icon,
          actor: input.actor,
          createdAt: createdAt.toISOString(),
        }),
      );
  } catch (err) {
    if (err instanceof DomainError) return reply.code(400).send({ code: err.code });
    throw err;
  }
});

await app.listen({ port: Number(port), host: "127.0.0.1" });
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`);
process.once("SIGTERM", () => {
  void app.close().then(() => db.close());
});
