import type { AddressInfo } from "node:net";
import { type Client, createClient } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { TenantLookupService } from "../gen/replay/identity/v1/lookup_pb.js";
import { MarkersService } from "../gen/replay/markers/v1/markers_pb.js";
import { OutboxService } from "../gen/replay/ops/v1/ops_pb.js";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../gen/replay/replays/v1/replays_pb.js";
import { RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { WebhookOpsService, WebhookSecretsService, WebhooksService } from "../gen/replay/webhooks/v1/webhooks_pb.js";
import { decodeEvent } from "../lib/bus/events.js";
import { createOutboxService, outboxReport } from "../lib/bus/outbox-service.js";
import type { Config, ServiceName } from "../lib/config.js";
import type { Migration } from "../lib/db/migrate.js";
import { resealWorker } from "../lib/db/reseal-secrets.js";
import { logger } from "../lib/log.js";
import { sourceFolder } from "../lib/paths.js";
import type { Platform } from "../lib/platform.js";
import { boundUrl } from "../lib/rpc/bound-url.js";
import { createTransportPool } from "../lib/rpc/clients.js";
import { createRpcServer } from "../lib/rpc/server.js";
import { loadSecretBox } from "../lib/secrets/load.js";
import { msUntil, openSchema, type Running, schemaMigrations } from "../lib/service-host.js";
import { sharedAnswer } from "../lib/shared-answer.js";
import { DRAIN_MS, startWorker } from "../lib/worker/worker.js";
import { buildApp } from "./app.js";
import { createAuthenticator } from "./auth/authenticate.js";
import { createKeyCache } from "./auth/key-cache.js";
import { forwardService } from "./forward.js";
import { createIdentityAdminService, SIGNING_KEY_SECRETS } from "./identity/admin-service.js";
import { createTenantLookupService } from "./identity/lookup-service.js";
import { countTenants, deleteNoncesExpired } from "./identity/store.js";
import { createRateLimiter } from "./rate-limit.js";
import { publicRoutes } from "./routes/table.js";

const log = logger("gateway:main");

export type RunningGateway = Running & {
  internalUrl: string;
  /** The addresses the public and internal ports really bound (HOST, INTERNAL_HOST), for the banner. */
  bound: { public: string; internal: string };
  port: number;
  internalPort: number;
  /** True when no tenant existed at start: a fresh data directory. */
  fresh: boolean;
};

const NONCE_SWEEP_MS = 60_000;
const NONCE_SWEEP_BATCH = 5_000;
/** How long a readiness answer is reused (GET /readyz and the internal port's Health). */
const READINESS_TTL_MS = 1_000;

/** The identity schema's migrations (the gateway owns it). */
export function identityMigrations(): Promise<Migration[]> {
  return schemaMigrations("identity", sourceFolder(import.meta.url, "./identity/migrations"));
}

/**
 * The gateway: public REST on config.http.port, the internal admin API (Connect/gRPC, h2c) on
 * config.http.internalPort, calling the services at config.serviceUrls.
 */
export async function start(config: Config, platform: Platform): Promise<RunningGateway> {
  const schema = await openSchema("identity", await identityMigrations(), config, platform, { poolMax: 20 });
  const db = schema.db;
  const fresh = (await countTenants(db)) === 0;
  // The start's steps at debug level: a start that never reaches "gateway listening" says where it waits.
  log.debug({ fresh }, "identity schema open");
  const keyCache = createKeyCache();
  const secrets = await loadSecretBox(config);
  const now = () => Date.now();

  const pool = createTransportPool({ token: config.internal.token });
  const transport = (name: ServiceName) => pool.transport(config.serviceUrls[name]);
  const servers = createClient(ServersService, transport("servers"));
  const replays = createClient(ReplaysService, transport("replays"));
  const markers = createClient(MarkersService, transport("markers"));
  const webhooks = createClient(WebhooksService, transport("webhooks"));
  const backends: [ServiceName, Client<typeof Health>][] = (["markers", "servers", "replays", "webhooks"] as const).map(
    (name) => [name, createClient(Health, transport(name))],
  );

  // Every replica evicts a revoked key at once; the cache TTL bounds it if this message is late.
  const stopRevocations = await platform.bus.broadcast(["identity.key.revoked"], async (msg) => {
    keyCache.evict(decodeEvent("identity.key.revoked", msg.data).keyHash);
  });
  log.debug("subscribed to key revocations");
  const reseal = startWorker(resealWorker(db, SIGNING_KEY_SECRETS, secrets, log));
  const nonceSweep = startWorker({
    name: "identity:nonce-sweep",
    intervalMs: NONCE_SWEEP_MS,
    // A full batch runs the next round at once, until a short one says the backlog is gone.
    round: async () => (await deleteNoncesExpired(db, new Date(), NONCE_SWEEP_BATCH)) === NONCE_SWEEP_BATCH,
  });

  /**
   * What is not ready, by name: the database, the event bus, each backend service (its gRPC health).
   * One check a second at most, shared by every caller meanwhile (GET /readyz is unauthenticated,
   * and each check is a query and four calls: 50 probes in flight once made it flap to 503).
   */
  const notReady = sharedAnswer(READINESS_TTL_MS, async (): Promise<string[]> => {
    const checks: Promise<string | undefined>[] = [
      db.query("SELECT 1").then(
        () => undefined,
        () => "database",
      ),
      Promise.resolve(platform.bus.isReady() ? undefined : "event bus"),
      ...backends.map(([name, health]) =>
        health.check({ service: "" }, { timeoutMs: 2000 }).then(
          (res) => (res.status === HealthCheckResponse_ServingStatus.SERVING ? undefined : `${name} service`),
          () => `${name} service`,
        ),
      ),
    ];
    return (await Promise.all(checks)).filter((name): name is string => name !== undefined);
  });
  const isReady = async () => (await notReady()).length === 0;

  const app = buildApp({
    routes: publicRoutes({ markers, servers, replays, webhooks }),
    authenticator: createAuthenticator({ db, keyCache, now, secrets }),
    rateLimiter: createRateLimiter({ replicas: config.gateway.replicas }),
    db,
    notReady,
    now,
  });
  await app.listen({ port: config.http.port ?? 8080, host: config.http.host });
  const port = app.server.address() as AddressInfo;
  log.debug({ port: port.port }, "public port listening");

  const admin = await createRpcServer({
    name: "gateway-internal",
    port: config.http.internalPort,
    host: config.http.internalHost,
    acceptedTokens: config.internal.acceptedTokens,
    isReady,
    routes(router) {
      router.service(
        IdentityAdminService,
        createIdentityAdminService({
          db,
          keyCache,
          secrets,
          webhookSecrets: createClient(WebhookSecretsService, transport("webhooks")),
          servers,
          replays,
        }),
      );
      router.service(TenantLookupService, createTenantLookupService({ db }));
      router.service(ServersService, forwardService(ServersService, servers));
      router.service(
        RecorderService,
        forwardService(RecorderService, createClient(RecorderService, transport("servers"))),
      );
      router.service(ReplaysService, forwardService(ReplaysService, replays));
      router.service(
        RecordingService,
        forwardService(RecordingService, createClient(RecordingService, transport("replays"))),
      );
      router.service(MarkersService, forwardService(MarkersService, markers));
      router.service(WebhooksService, forwardService(WebhooksService, webhooks));
      router.service(
        WebhookOpsService,
        forwardService(WebhookOpsService, createClient(WebhookOpsService, transport("webhooks"))),
      );
      // Every process's outbox: the identity schema's here, each service's from the service.
      const outboxes = (["markers", "servers", "replays", "webhooks"] as const).map((name) =>
        createClient(OutboxService, transport(name)),
      );
      router.service(
        OutboxService,
        createOutboxService(async () => [
          await outboxReport(db),
          ...(await Promise.all(outboxes.map(async (client) => (await client.outboxStatus({})).outboxes))).flat(),
        ]),
      );
    },
  });
  log.info({ port: port.port, internalPort: admin.port }, "gateway listening");

  return {
    url: `http://127.0.0.1:${port.port}`,
    internalUrl: admin.url,
    bound: { public: boundUrl(port), internal: admin.boundUrl },
    port: port.port,
    internalPort: admin.port,
    fresh,
    async close(deadline = Date.now() + DRAIN_MS) {
      // Stop taking requests first (in-flight ones finish), then the background work, then the pool.
      await Promise.all([app.close(), admin.close(msUntil(deadline))]);
      await stopRevocations();
      await Promise.all([
        nonceSweep.stop(msUntil(deadline)),
        reseal.stop(msUntil(deadline)),
        schema.stop(msUntil(deadline)),
      ]);
      await Promise.all([db.close(), pool.close()]);
    },
  };
}
