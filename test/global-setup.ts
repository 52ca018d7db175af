import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { createPostgresTemplate, writeEmbeddedTemplate } from "./db-template.js";
import { freePorts } from "./free-port.js";
import { natsServer, natsServerBinary } from "./nats-server.js";
import type { SharedSystemInfo } from "./shared-system.js";
import { type System, startDistributedSystem, startEmbeddedSystem } from "./system.js";
import { writeReceiverCertificate } from "./webhook-receiver.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** A NATS server with JetStream for the tests: NATS_URL, or one this run started; "" when neither. */
    natsUrl: string;
    /** The systems every end-to-end file shares: embedded always, distributed with Postgres and NATS. */
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

/**
 * One running system per mode for the whole run, shared by the end-to-end files (each isolates
 * itself with tenants of its own): the embedded one always, and the distributed one (two gateway
 * replicas) when DATABASE_URL is set and a NATS server is at hand. Without NATS_URL a private
 * nats-server is started when the binary is installed, so the NATS adapter's tests run too.
 * Teardown stops everything and fails the run if a process did not exit 0 on SIGTERM.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let natsUrl = process.env.NATS_URL ?? "";
  let stopNats = async () => {};
  const binary = natsServerBinary();
  if (natsUrl === "" && binary) {
    const storeDir = await mkdtemp(join(tmpdir(), "replay-test-nats-"));
    const [port] = await freePorts(1);
    const server = natsServer(binary, port as number, storeDir);
    await server.start();
    natsUrl = server.url;
    stopNats = async () => {
      await server.kill();
      await rm(storeDir, { recursive: true, force: true });
    };
  }
  const distributed = Boolean(process.env.DATABASE_URL) && natsUrl !== "";
  const skipped = [
    !distributed &&
      "the distributed-mode tests (two gateway replicas, killed processes, NATS subjects of a running system) need DATABASE_URL",
    natsUrl === "" && "the NATS adapter's tests need NATS_URL or a nats-server binary on PATH",
  ].filter(Boolean);
  process.stdout.write(
    `replay tests: embedded system${distributed ? " and distributed system (Postgres, NATS)" : ""}; NATS for adapter tests: ${natsUrl || "none"}\n` +
      (skipped.length > 0 ? `  skipped, each with its reason: ${skipped.join("; ")}\n` : ""),
  );

  const templateDir = await mkdtemp(join(tmpdir(), "replay-test-template-"));
  writeReceiverCertificate(templateDir);
  // One receiver port per test file that receives deliveries while others run: webhooks, the
  // docs/webhooks.md's example receiver, the API reference's contract test, the metrics test, the
  // Python and Go verifiers' test (test/verifiers.test.ts), the client package's (test/client-webhooks.test.ts),
  // managing a subscription (test/webhook-subscriptions.test.ts) and secrets at rest.
  const receiverPorts = await freePorts(8);
  const [
    receiverPort,
    examplePort,
    contractPort,
    metricsPort,
    verifiersPort,
    clientPort,
    subscriptionsPort,
    secretsPort,
  ] = receiverPorts as [number, number, number, number, number, number, number, number];
  // A short schedule and timeout, so that retries, exhaustion and a hanging receiver fit in a test.
  const webhookEnv = {
    WEBHOOK_ALLOW_TARGETS: receiverPorts.map((port) => `127.0.0.1:${port}`).join(","),
    WEBHOOK_CA_FILE: join(templateDir, "cert.pem"),
    WEBHOOK_RETRY_SCHEDULE: "0,300ms,300ms",
    WEBHOOK_TIMEOUT_MS: "2000",
  };
  const embeddedTemplate = join(templateDir, "embedded.tar");
  const [started, postgresTemplate] = await Promise.all([
    Promise.allSettled([
      startEmbeddedSystem(webhookEnv),
      distributed ? startDistributedSystem({ gateways: 2, natsUrl, env: webhookEnv }) : Promise.resolve(undefined),
    ]),
    process.env.DATABASE_URL ? createPostgresTemplate(process.env.DATABASE_URL) : undefined,
    writeEmbeddedTemplate(embeddedTemplate),
  ]);
  const dropTemplates = async () => {
    await postgresTemplate?.drop();
    await rm(templateDir, { recursive: true, force: true });
  };
  const systems = started.flatMap((s) => (s.status === "fulfilled" && s.value ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    await Promise.all(systems.map((sys) => sys.stop()));
    await stopNats();
    await dropTemplates();
    throw failed.reason;
  }
  project.provide("natsUrl", natsUrl);
  project.provide("templateDatabase", postgresTemplate?.name ?? "");
  project.provide("embeddedTemplate", embeddedTemplate);
  project.provide("webhookReceiver", {
    port: receiverPort,
    certDir: templateDir,
    examplePort,
    contractPort,
    metricsPort,
    verifiersPort,
    clientPort,
    subscriptionsPort,
    secretsPort,
  });
  project.provide("systems", systems.map(describeSystem));

  return async () => {
    const codes = await Promise.all(systems.map(async (sys) => ({ sys, codes: await sys.stop() })));
    await stopNats();
    await dropTemplates();
    const unclean = codes.filter(({ codes }) => codes.some((code) => code !== 0));
    if (unclean.length > 0) {
      throw new Error(
        `a shared system did not exit 0 on SIGTERM:\n${unclean.map(({ sys, codes }) => `${sys.mode}: ${codes.join(", ")}\n${sys.output()}`).join("\n")}`,
      );
    }
  };
}

function describeSystem(sys: System): SharedSystemInfo {
  return {
    mode: sys.mode,
    gatewayUrls: sys.gatewayUrls,
    internalUrl: sys.internalUrl,
    databaseUrl: sys.databaseUrl,
    serviceUrls: sys.serviceUrls,
    ownServiceUrls: sys.ownServiceUrls,
    natsNamespace: sys.natsNamespace,
    blobDir: sys.blobDir,
  };
}
