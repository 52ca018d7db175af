import { inject } from "vitest";
import { adminClient, type SystemHandle } from "./system.js";

/** What a running shared system is, as the global setup hands it to test files (serialisable). */
export type SharedSystemInfo = {
  mode: "embedded" | "distributed";
  gatewayUrls: string[];
  internalUrl: string;
  databaseUrl: string | undefined;
  serviceUrls: Record<string, string> | undefined;
  ownServiceUrls: Record<string, string>;
  natsNamespace: string | undefined;
  blobDir: string;
};

/**
 * The systems the global setup started, one per mode available here, for `describe.each`: the
 * embedded one always, the distributed one (two gateway replicas) with Postgres and NATS.
 */
export function sharedSystems(): SystemHandle[] {
  return inject("systems").map((info) => ({
    ...info,
    baseUrl: info.gatewayUrls[0] as string,
    admin: adminClient(info.internalUrl),
  }));
}

/** The NATS server tests may use (NATS_URL or the run's own), or undefined when there is none. */
export function testNatsUrl(): string | undefined {
  return inject("natsUrl") || undefined;
}

/**
 * One shared system, for `describe.each`, for files whose subject is the same code in both modes
 * (the gateway's HTTP handling, the admin API and replayctl, the gRPC servers): the distributed one
 * where Postgres and NATS are here (the production mode), else the embedded one. What differs by
 * mode (events, processes, the embedded database) keeps `sharedSystems()`.
 */
export function oneSharedSystem(): SystemHandle[] {
  const systems = sharedSystems();
  return [systems.find((s) => s.mode === "distributed") ?? (systems[0] as SystemHandle)];
}
