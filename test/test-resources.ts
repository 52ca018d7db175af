import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProvidedContext } from "vitest";
import type { TestProject } from "vitest/node";
import { createPostgresTemplate, writeEmbeddedTemplate } from "./db-template.js";
import { freePorts } from "./free-port.js";
import { natsServer, natsServerBinary } from "./nats-server.js";
import type { SharedSystemInfo } from "./shared-system.js";
import { writeReceiverCertificate } from "./webhook-receiver.js";

// What every layer but `unit` gets from its global setup: a NATS server, the migrated database
// templates, and the webhook receivers' ports and certificate. The e2e layer adds the shared systems
// (global-setup.ts); the integration and slow layers start none (global-setup-resources.ts).

declare module "vitest" {
  export interface ProvidedContext {
    /** A NATS server with JetStream for the tests: NATS_URL, or one this run started; "" when neither. */
    natsUrl: string;
    /** The systems every e2e file shares: embedded always, distributed with Postgres and NATS (none in other layers). */
    systems: SharedSystemInfo[];
    /** A Postgres database with every schema migrated, to create per-file databases from ("" without DATABASE_URL). */
    templateDatabase: string;
    /** A file holding the embedded database with every schema migrated, for in-memory test databases. */
    embeddedTemplate: string;
    /**
     * Where test/webhooks.test.ts runs its HTTPS receiver (`port`) and test/readme.test.ts the
     * docs/webhooks.md's example receiver (`examplePort`): the two ports the shared systems' delivery may reach
     * on loopback (WEBHOOK_ALLOW_TARGETS), and the folder of the certificate they trust (WEBHOOK_CA_FILE).
     */
    webhookReceiver: {
      port: number;
      certDir: string;
      examplePort: number;
      contractPort: number;
      metricsPort: number;
      verifiersPort: number;
      /** test/client-webhooks.test.ts: the client package's verifier and event types on real deliveries. */
      clientPort: number;
      /** test/webhook-subscriptions.test.ts: managing a subscription (decisions.md §6.1). */
      subscriptionsPort: number;
      /** test/secrets-at-rest.test.ts: a subscription whose secret was sealed by the upgrade. */
      secretsPort: number;
    };
  }
}

/** A NATS server with JetStream: NATS_URL, else one started here when the binary is installed; "" when neither. */
async function testNats(): Promise<{ natsUrl: string; stop(): Promise<void> }> {
  const given = process.env.NATS_URL ?? "";
  const binary = natsServerBinary();
  if (given !== "" || !binary) return { natsUrl: given, stop: async () => {} };
  const storeDir = await mkdtemp(join(tmpdir(), "replay-test-nats-"));
  const [port] = await freePorts(1);
  const server = natsServer(binary, port as number, storeDir);
  await server.start();
  return {
    natsUrl: server.url,
    async stop() {
      await server.kill();
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}

/**
 * The webhook receivers' loopback ports (one per file that receives deliveries while others run)
 * and the certificate they serve, with the delivery settings a system under test needs to reach
 * them: a short schedule and timeout, so that retries, exhaustion and a hanging receiver fit in a test.
 */
export async function testReceivers(): Promise<{
  webhookReceiver: ProvidedContext["webhookReceiver"];
  webhookEnv: Record<string, string>;
  stop(): Promise<void>;
}> {
  const certDir = await mkdtemp(join(tmpdir(), "replay-test-template-"));
  writeReceiverCertificate(certDir);
  const ports = await freePorts(8);
  const [port, examplePort, contractPort, metricsPort, verifiersPort, clientPort, subscriptionsPort, secretsPort] =
    ports as [number, number, number, number, number, number, number, number];
  return {
    webhookReceiver: {
      port,
      certDir,
      examplePort,
      contractPort,
      metricsPort,
      verifiersPort,
      clientPort,
      subscriptionsPort,
      secretsPort,
    },
    webhookEnv: {
      WEBHOOK_ALLOW_TARGETS: ports.map((p) => `127.0.0.1:${p}`).join(","),
      WEBHOOK_CA_FILE: join(certDir, "cert.pem"),
      WEBHOOK_RETRY_SCHEDULE: "0,300ms,300ms",
      WEBHOOK_TIMEOUT_MS: "2000",
    },
    stop: () => rm(certDir, { recursive: true, force: true }),
  };
}

/** The migrated templates per-file test databases are made from: Postgres (with DATABASE_URL) and embedded. */
async function testTemplates(
  dir: string,
): Promise<{ templateDatabase: string; embeddedTemplate: string; drop(): Promise<void> }> {
  const embeddedTemplate = join(dir, "embedded.tar");
  const [postgres] = await Promise.all([
    process.env.DATABASE_URL ? createPostgresTemplate(process.env.DATABASE_URL) : undefined,
    writeEmbeddedTemplate(embeddedTemplate),
  ]);
  return {
    templateDatabase: postgres?.name ?? "",
    embeddedTemplate,
    drop: async () => {
      await postgres?.drop();
    },
  };
}

type RunResources = { natsUrl: string; templateDatabase: string; embeddedTemplate: string; release(): Promise<void> };
type SharedRun = { ready: Promise<RunResources>; users: number };
const RUN = Symbol.for("replay.test-run-resources");

/**
 * NATS and the templates, made by the first layer's global setup and shared by the rest of the run
 * (vitest runs each project's setup in turn, in one process; building the templates once per layer
 * cost ~8 s each). Each caller releases; the last release stops and drops them.
 */
export async function runResources(): Promise<RunResources> {
  const holder = globalThis as { [RUN]?: SharedRun };
  if (!holder[RUN]) {
    holder[RUN] = {
      users: 0,
      ready: (async () => {
        const dir = await mkdtemp(join(tmpdir(), "replay-test-templates-"));
        const [nats, templates] = await Promise.all([testNats(), testTemplates(dir)]);
        return {
          natsUrl: nats.natsUrl,
          templateDatabase: templates.templateDatabase,
          embeddedTemplate: templates.embeddedTemplate,
          async release() {
            await nats.stop();
            await templates.drop();
            await rm(dir, { recursive: true, force: true });
          },
        };
      })(),
    };
  }
  const shared = holder[RUN];
  shared.users++;
  const resources = await shared.ready;
  return {
    ...resources,
    async release() {
      if (--shared.users > 0) return;
      delete holder[RUN];
      await resources.release();
    },
  };
}

/** Provides what every layer but `unit` reads (all but the shared systems). */
export function provideResources(project: TestProject, resources: Omit<ProvidedContext, "systems">): void {
  project.provide("natsUrl", resources.natsUrl);
  project.provide("templateDatabase", resources.templateDatabase);
  project.provide("embeddedTemplate", resources.embeddedTemplate);
  project.provide("webhookReceiver", resources.webhookReceiver);
}
