import { join } from "node:path";
import type { Bus } from "./bus/bus.js";
import { createEmbeddedBus } from "./bus/embedded.js";
import { createNatsBus } from "./bus/nats.js";
import type { Config } from "./config.js";
import { createPgDb } from "./db/db.js";
import { createEmbeddedDb, type EmbeddedPostgres, openEmbeddedPostgres } from "./db/embedded.js";
import type { Db } from "./db/types.js";

/**
 * What every process gets from its run mode: a database per schema and the event bus. The
 * distributed mode uses Postgres (DATABASE_URL) and NATS JetStream (NATS_URL); the embedded mode an
 * in-process Postgres and bus. Services cannot tell the difference.
 */
export type Platform = {
  openDb(schema: string, options?: { poolMax?: number }): Db;
  bus: Bus;
  close(): Promise<void>;
};

export async function openPlatform(config: Config, name: string): Promise<Platform> {
  let embedded: EmbeddedPostgres | undefined;
  if (config.db.url === undefined) embedded = await openEmbeddedPostgres(join(config.db.dataDir, "pg"));
  const dbs: Db[] = [];
  const openDb = (schema: string, options?: { poolMax?: number }): Db => {
    const db = embedded
      ? createEmbeddedDb(embedded, schema)
      : createPgDb({
          url: config.db.url as string,
          schema,
          poolMax: options?.poolMax,
          applicationName: `replay-${schema}`,
        });
    dbs.push(db);
    return db;
  };
  const bus = config.bus.natsUrl
    ? await createNatsBus({
        servers: config.bus.natsUrl,
        namespace: config.bus.namespace,
        name,
        maxAgeMs: config.events.retentionMs,
      })
    : await createEmbeddedBus(openDb);
  return {
    bus,
    openDb,
    async close() {
      await bus.close();
      await Promise.all(dbs.map((db) => db.close()));
      await embedded?.close();
    },
  };
}
