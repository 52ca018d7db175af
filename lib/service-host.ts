import type { ConnectRouter } from "@connectrpc/connect";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import type { Bus } from "./bus/bus.js";
import { outboxMigrations, startOutboxRelay } from "./bus/outbox.js";
import { migrate, readMigrations } from "./db/migrate.js";
import type { Db } from "./db/types.js";
import type { Platform } from "./platform.js";
import { createHealthService } from "./rpc/health.js";
import { createRpcServer } from "./rpc/server.js";

/** A started process part: its RPC address, and how to stop it (drain, then release). */
export type Running = { url: string; close(): Promise<void> };

export type ServiceSpec = {
  /** The service's name, which is also its schema. */
  name: string;
  /** Its migrations folder (see sourceFolder); absent while the schema holds only the outbox. */
  migrationsDir?: string;
  /** Fully-qualified names of the RPC services served, for grpc.health.v1. */
  healthNames: readonly string[];
  /** Wires the service on its database and the bus: its RPC services and its event consumers. */
  setup(
    db: Db,
    bus: Bus,
  ): {
    routes(router: ConnectRouter): void;
    /** Starts the event consumers; resolves to their stop functions. */
    consumers?(): Promise<(() => Promise<void>)[]>;
  };
};

/**
 * Starts one service the same way in both run modes: its schema's migrations (the outbox and
 * inbox first), the outbox relay, its consumers, then the RPC server with grpc.health.v1. Stopping
 * reverses it: stop accepting and drain RPCs, stop consumers and the relay, release the pool.
 */
export async function startService(
  spec: ServiceSpec,
  platform: Platform,
  listen: { port: number; host: string },
): Promise<Running> {
  const db = platform.openDb(spec.name);
  const own = spec.migrationsDir ? await readMigrations(spec.migrationsDir) : [];
  await migrate(db, [...outboxMigrations(spec.name), ...own]);
  const relay = startOutboxRelay({ db, bus: platform.bus });
  const wired = spec.setup(db, platform.bus);
  const stopConsumers = (await wired.consumers?.()) ?? [];
  const isReady = async () => {
    await db.query("SELECT 1");
    return platform.bus.isReady();
  };
  const server = await createRpcServer({
    name: spec.name,
    port: listen.port,
    host: listen.host,
    routes(router) {
      wired.routes(router);
      router.service(Health, createHealthService(spec.healthNames, isReady));
    },
  });
  return {
    url: server.url,
    async close() {
      await server.close();
      await Promise.all(stopConsumers.map((stop) => stop()));
      await relay.stop();
      await db.close();
    },
  };
}
