import type { TestProject } from "vitest/node";
import type { SharedSystemInfo } from "./shared-system.js";
import { type System, startDistributedSystem, startEmbeddedSystem } from "./system.js";
import { provideResources, runResources, testReceivers } from "./test-resources.js";

/**
 * The e2e layer's global setup: one running system per mode for the whole run, shared by its files
 * (each isolates itself with tenants of its own): the embedded one always, and the distributed one
 * (two gateway replicas) when DATABASE_URL is set and a NATS server is at hand; and what every layer
 * gets (test-resources.ts). Teardown stops everything and fails the run if a process did not exit
 * 0 on SIGTERM.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [resources, receivers] = await Promise.all([runResources(), testReceivers()]);
  const { natsUrl } = resources;
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
  const env = receivers.webhookEnv;
  const started = await Promise.allSettled([
    startEmbeddedSystem(env),
    distributed ? startDistributedSystem({ gateways: 2, natsUrl, env }) : Promise.resolve(undefined),
  ]);
  const release = async () => {
    await resources.release();
    await receivers.stop();
  };
  const systems = started.flatMap((s) => (s.status === "fulfilled" && s.value ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) {
    await Promise.all(systems.map((sys) => sys.stop()));
    await release();
    throw failed.reason;
  }
  provideResources(project, { ...resources, webhookReceiver: receivers.webhookReceiver });
  project.provide("systems", systems.map(describeSystem));

  return async () => {
    const codes = await Promise.all(systems.map(async (sys) => ({ sys, codes: await sys.stop() })));
    await release();
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
