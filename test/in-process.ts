import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, inject } from "vitest";
import type { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { deleteNamespaceStreams } from "../lib/bus/_testing.js";
import { loadConfig, serviceNames, servicePortVariable } from "../lib/config.js";
import { createTestDatabase, embeddedTemplateDump } from "../lib/db/_testing.js";
import type { Db } from "../lib/db/types.js";
import { configureLogging } from "../lib/log.js";
import { openPlatform } from "../lib/platform.js";
import { startAll } from "../start-all.js";
import { adminClient } from "./system.js";

/** What the route tests need of a system: test/http.ts's helpers take it. */
export type InProcessSystem = {
  baseUrl: string;
  internalUrl: string;
  admin: Client<typeof IdentityAdminService>;
  /** The system's own database as `schema`'s owner reaches it, for tests that seed or inspect it while it runs. */
  db(schema: string): Db;
  close(): Promise<void>;
};

export type InProcessOptions = {
  /**
   * The embedded database and bus even where Postgres and NATS are here: for what the embedded
   * mode alone runs (its database adapter: one connection, PGlite's values).
   */
  embedded?: boolean;
};

/** Where the system keeps its data and sends its events, and how to remove them afterwards. */
type Storage = { env: Record<string, string>; embeddedFrom?: Blob; remove(): Promise<void> };

/**
 * A database of the system's own from the run's migrated template: with DATABASE_URL and a NATS
 * server, a Postgres database and a NATS namespace of its own (the in-process bus is for the
 * embedded database only: it reads each outbox in id order, which concurrent commits on a pool
 * break, and holds a connection per subject it reads); else the embedded one, in memory, with the
 * in-process bus.
 */
async function openStorage(embedded = false): Promise<Storage> {
  const databaseUrl = process.env.DATABASE_URL;
  const natsUrl = inject("natsUrl");
  if (embedded || !databaseUrl || !natsUrl)
    return { env: {}, embeddedFrom: await embeddedTemplateDump(), remove: async () => {} };
  const database = await createTestDatabase(databaseUrl);
  const namespace = `route_${randomBytes(4).toString("hex")}`;
  return {
    env: { DATABASE_URL: database.url, NATS_URL: natsUrl, NATS_NAMESPACE: namespace },
    async remove() {
      await deleteNamespaceStreams(natsUrl, namespace);
      await database.drop();
    },
  };
}

/**
 * The four services and the gateway inside the test process, composed as `npm start` composes them
 * (start-all.ts), on loopback ports the OS picks, with a DATA_DIR (secrets, page token key, blobs)
 * and a database of their own. `env` adds or overrides variables (WEBHOOK_DELIVERY=off, ...).
 */
export async function startInProcess(
  env: Record<string, string> = {},
  options: InProcessOptions = {},
): Promise<InProcessSystem> {
  const dataDir = await mkdtemp(join(tmpdir(), "replay-in-process-"));
  const storage = await openStorage(options.embedded);
  const removeAll = async () => {
    await storage.remove();
    await rm(dataDir, { recursive: true, force: true });
  };
  const ports = Object.fromEntries(serviceNames.map((service) => [servicePortVariable(service), "0"]));
  const config = loadConfig({
    DATA_DIR: dataDir,
    PORT: "0",
    INTERNAL_PORT: "0",
    LOG_LEVEL: "error",
    ...ports,
    ...storage.env,
    ...env,
  });
  configureLogging(config.log.level);
  const platform = await openPlatform(config, "in-process", { embeddedFrom: storage.embeddedFrom }).catch(
    async (err) => {
      await removeAll();
      throw err;
    },
  );
  const { gateway, services } = await startAll(config, platform).catch(async (err) => {
    await platform.close();
    await removeAll();
    throw err;
  });
  return {
    baseUrl: gateway.url,
    internalUrl: gateway.internalUrl,
    admin: adminClient(gateway.internalUrl),
    db: (schema) => platform.openDb(schema),
    async close() {
      // The gateway first, so that nothing new reaches the services while they stop.
      for (const part of [gateway, ...services]) await part.close();
      await platform.close();
      await removeAll();
    },
  };
}

/**
 * One in-process system for the enclosing file or describe block: started before its tests, closed
 * after them. Returns a getter, since the system exists only once beforeAll has run.
 */
export function useInProcessSystem(
  env: Record<string, string> = {},
  options: InProcessOptions = {},
): () => InProcessSystem {
  let sys: InProcessSystem | undefined;
  beforeAll(async () => {
    sys = await startInProcess(env, options);
  }, 120_000);
  afterAll(async () => {
    await sys?.close();
  }, 30_000);
  return () => {
    if (!sys) throw new Error("the in-process system is not started (beforeAll failed)");
    return sys;
  };
}
