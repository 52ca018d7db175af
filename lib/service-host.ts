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

/** A started process part: its RPC address, and how to stop it (drain, then release). */
/**
 * A started part of a process. `close` drains it by `deadline` (Date.now() milliseconds; DRAIN_MS
 * from the call when absent): the parts of one process share one deadline, so the whole stop takes
 * operations.md's "up to 10 s", not 10 s per part and step.
 */
export type Running = { url: string; close(deadline?: number): Promise<void> };

/** The milliseconds left until `deadline`, never negative. */
export function msUntil(deadline: number): number {
  return Math.max(0, deadline - Date.now());
}

/** What a service is built from: its schema's database, the bus, the blob store, the configuration and the clock. */
export type ServiceDeps = {
  db: Db;
  bus: Bus;
  blobs: BlobStore;
  config: Config;
  now: () => Date;
  /** Clients of the other services, for lookups of what they own. */
  peers: Peers;
};

/** What a service is made of: its RPC services, its consumers of others' events, its background workers. */
export type ServiceParts = {
  routes(router: ConnectRouter): void;
  consumers?: readonly Consumer[];
  workers?: readonly WorkerSpec[];
};

export type ServiceSpec = {
  /** The service's name, which is also its schema. */
  name: string;
  /** Its migrations folder (see sourceFolder); absent while the schema holds only the outbox. */
  migrationsDir?: string;
  setup(deps: ServiceDeps): ServiceParts | Promise<ServiceParts>;
};

/** Everything a schema is migrated with: the platform's outbox and inbox first, then its own folder. */
export async function schemaMigrations(schema: string, migrationsDir?: string): Promise<Migration[]> {
  return [...outboxMigrations(schema), ...(migrationsDir ? await readMigrations(migrationsDir) : [])];
}

/** A schema opened for a process part: its pool, migrated, with its outbox relay and event retention running. */
export type OpenSchema = { db: Db; stop(graceMs?: number): Promise<void> };

/**
 * What every owner of a schema runs, a service or the gateway: the migrations (the outbox and inbox
 * first), the outbox relay and the event retention worker. `stop` stops the relay and the worker;
 * the pool is the caller's to close, after whatever else still uses it.
 */
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
 * Starts one service the same way in both run modes: its schema's migrations (the outbox and
 * inbox first), the outbox relay and the event retention worker, its consumers and workers, then
 * the RPC server with grpc.health.v1 on config.http. Stopping reverses it, all by one deadline: stop
 * accepting and drain RPCs, stop consumers and workers (a round still running when the deadline
 * comes is aborted), then the relay, then the pool.
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
