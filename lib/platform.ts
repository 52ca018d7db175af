import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { BlobStore } from "./blob/blob.js";
import { openBlobStore } from "./blob/open.js";
import type { Bus } from "./bus/bus.js";
import { createEmbeddedBus } from "./bus/embedded.js";
import { createNatsBus, isNatsUnreachable } from "./bus/nats.js";
import type { Config } from "./config.js";
import { createPgDb } from "./db/db.js";
import { createEmbeddedDb, type EmbeddedPostgres, openEmbeddedPostgres } from "./db/embedded.js";
import type { Db } from "./db/types.js";
import { whenReachable } from "./startup-wait.js";

/**
 * What every process gets from its run mode: a database per schema and the event bus. The
 * distributed mode uses Postgres (DATABASE_URL) and NATS JetStream (NATS_URL); the embedded mode an
 * in-process Postgres and bus. Services cannot tell the difference.
 */
export type Platform = {
  openDb(schema: string, options?: { poolMax?: number }): Db;
  bus: Bus;
  /** Large objects (replay archives): BLOB_URL, by default DATA_DIR/blobs. */
  blobs: BlobStore;
  close(): Promise<void>;
  /**
   * For the process's exit only (synchronous): drops DATA_DIR's lock if it is still held, so that
   * a start that failed after taking it, or a process that ends without closing, leaves none.
   */
  releaseAtExit(): void;
};

export type PlatformOptions = {
  /**
   * The embedded database's content, kept in memory instead of on disk under DATA_DIR (tests: the
   * run's migrated template, so that a system starts without running a migration).
   */
  embeddedFrom?: Blob;
};

export async function openPlatform(
  config: Config,
  name: string,
  { embeddedFrom }: PlatformOptions = {},
): Promise<Platform> {
  let embedded: EmbeddedPostgres | undefined;
  if (config.db.url === undefined) {
    embedded = embeddedFrom
      ? await openEmbeddedPostgres(undefined, { from: embeddedFrom })
      : await openEmbeddedPostgres(join(config.db.dataDir, "pg"), { template: config.db.template });
  }
  const dbs: Db[] = [];
  const openDb = (schema: string, options?: { poolMax?: number }): Db => {
    const db = embedded
      ? createEmbeddedDb(embedded, schema)
      : createPgDb({
          url: config.db.url as string,
          ca: config.db.ca,
          schema,
          poolMax: options?.poolMax,
          applicationName: `replay-${schema}`,
        });
    dbs.push(db);
    return db;
  };
  let bus: Bus | undefined;
  try {
    const natsUrl = config.bus.natsUrl;
    bus = natsUrl
      ? await whenReachable(
          "NATS",
          () =>
            createNatsBus({
              servers: natsUrl,
              namespace: config.bus.namespace,
              name,
              maxAgeMs: config.events.retentionMs,
              replicas: config.bus.streamReplicas,
            }),
          isNatsUnreachable,
        )
      : await createEmbeddedBus(openDb);
    const blobs = await openBlobStore(config.blob.url ?? pathToFileURL(resolve(config.db.dataDir, "blobs")).href);
    return {
      bus,
      openDb,
      blobs,
      async close() {
        await bus?.close();
        await blobs.close();
        await Promise.all(dbs.map((db) => db.close()));
        await embedded?.close();
      },
      releaseAtExit: () => embedded?.releaseAtExit(),
    };
  } catch (err) {
    // Nothing else holds these yet: a failed start releases them, DATA_DIR's lock included.
    await bus?.close().catch(() => {});
    await Promise.all(dbs.map((db) => db.close().catch(() => {})));
    await embedded?.close().catch(() => {});
    throw err;
  }
}
