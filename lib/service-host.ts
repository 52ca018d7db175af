import type { ConnectRouter } from "@connectrpc/connect";
import { OutboxService } from "../gen/replay/ops/v1/ops_pb.js";
import type { BlobStore } from "./blob/blob.js";
import type { Bus } from "./bus/bus.js";
import { type Consumer, startConsumer } from "./bus/consumer.js";
import { outboxMigrations, startOutboxRelay } from "./bus/outbox.js";
import { createOutboxService, outboxReport } from "./bus/outbox-service.js";
import { startRetentionWorker } from "./bus/retention.js";
import type { Config } from "./config.js";
import { isConnectionLoss } from "./db/errors.js";
import { type Migration, migrate, readMigrations } from "./db/migrate.js";
import type { Db } from "./db/types.js";
import { watchOutbox } from "./metrics.js";
import type { Platform } from "./platform.js";
import { createPeers, type Peers } from "./rpc/peers.js";
import { createRpcServer } from "./rpc/server.js";
import { whenReachable } from "./startup-wait.js";
import { DRAIN_MS, startWorker, type WorkerSpec } from "./worker/worker.js";

/**
 * `close` drains by `deadline` (epoch ms; DRAIN_MS from now when absent): a process's parts share one
 * deadline, so the whole stop takes operations.md's "up to 10 s", not 10 s per part.
 */
export type Running = { url: string; close(deadline?: number): Promise<void> };

export function msUntil(deadline: number): number {
  return Math.max(0, deadline - Date.now());
}

export type ServiceDeps = {
  db: Db;
  bus: Bus;
  blobs: BlobStore;
  config: Config;
  now: () => Date;
  peers: Peers;
};

export type ServiceParts = {
  routes(router: ConnectRouter): void;
  consumers?: readonly Consumer[];
  workers?: readonly WorkerSpec[];
};

export type ServiceSpec = {
  /** Also its schema. */
  name: string;
  /** Absent while the schema holds only the outbox. */
  migrationsDir?: string;
  setup(deps: ServiceDeps): ServiceParts | Promise<ServiceParts>;
};

/** The platform's outbox and inbox first, then the owner's folder. */
export async function schemaMigrations(schema: string, migrationsDir?: string): Promise<Migration[]> {
  return [...outboxMigrations(schema), ...(migrationsDir ? await readMigrations(migrationsDir) : [])];
}

export type OpenSchema = { db: Db; stop(graceMs?: number): Promise<void> };

/** Migrations, outbox relay and event retention. The pool is the caller's to close, after all else using it. */
export async function openSchema(
  name: string,
  migrations: readonly Migration[],
  config: Config,
  platform: Platform,
  options: { poolMax?: number } = {},
): Promise<OpenSchema> {
  const db = platform.openDb(name, options);
  await whenReachable("Postgres", () => migrate(db, migrations), isConnectionLoss);
  const unwatch = watchOutbox(db);
  const relay = startOutboxRelay({ db, bus: platform.bus });
  const retention = startRetentionWorker(db, {
    eventsMs: config.events.retentionMs,
    inboxMs: config.events.inboxRetentionMs,
  });
  return {
    db,
    async stop(graceMs) {
      unwatch();
      await Promise.all([relay.stop(graceMs), retention.stop(graceMs)]);
    },
  };
}

/**
 * The same in both run modes. Stopping reverses the start by one deadline: RPCs drain, then consumers and
 * workers (a round running at the deadline is aborted), then the relay, then the pool.
 */
export async function startService(spec: ServiceSpec, config: Config, platform: Platform): Promise<Running> {
  const schema = await openSchema(spec.name, await schemaMigrations(spec.name, spec.migrationsDir), config, platform);
  const db = schema.db;
  const now = () => new Date();
  const peers = createPeers(
    (owner) => (owner === "gateway" ? config.gateway.internalUrl : config.serviceUrls[owner]),
    config.internal.token,
  );
  const parts = await spec.setup({ db, bus: platform.bus, blobs: platform.blobs, config, now, peers });
  const consumerDeps = { db, bus: platform.bus, inboxMs: config.events.inboxRetentionMs, now };
  const stopConsumers = await Promise.all((parts.consumers ?? []).map((c) => startConsumer(consumerDeps, c)));
  const workers = (parts.workers ?? []).map((worker) => startWorker(worker));
  const isReady = async () => {
    await db.query("SELECT 1");
    return platform.bus.isReady();
  };
  const server = await createRpcServer({
    name: spec.name,
    port: config.http.port ?? 0,
    host: config.http.internalHost,
    acceptedTokens: config.internal.acceptedTokens,
    routes(router) {
      parts.routes(router);
      router.service(
        OutboxService,
        createOutboxService(async () => [await outboxReport(db)]),
      );
    },
    isReady,
  });
  return {
    url: server.url,
    async close(deadline = Date.now() + DRAIN_MS) {
      await server.close(msUntil(deadline));
      await Promise.all([
        ...stopConsumers.map((stop) => stop()),
        ...workers.map((worker) => worker.stop(msUntil(deadline))),
      ]);
      await schema.stop(msUntil(deadline));
      await Promise.all([db.close(), peers.close()]);
    },
  };
}
