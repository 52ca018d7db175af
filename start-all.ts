import type { RunningGateway } from "./gateway/main.js";
import type { Config, ProcessName, ServiceName } from "./lib/config.js";
import { serviceNames } from "./lib/config.js";
import type { Platform } from "./lib/platform.js";
import { EMBEDDED_SERVICE_HOST } from "./lib/ports.js";
import type { Running } from "./lib/service-host.js";

// Each part's code is loaded when it starts: a process of the distributed deployment parses its own
// part only (a service ~0.4-0.6 s of CPU to load, all five ~0.8 s), and a refused start none of them.
const startGateway = async (config: Config, platform: Platform): Promise<RunningGateway> =>
  (await import("./gateway/main.js")).start(config, platform);

/** Each service's own start(config, platform). */
const serviceStarts: Record<ServiceName, (config: Config, platform: Platform) => Promise<Running>> = {
  markers: async (config, platform) => (await import("./services/markers/main.js")).start(config, platform),
  servers: async (config, platform) => (await import("./services/servers/main.js")).start(config, platform),
  replays: async (config, platform) => (await import("./services/replays/main.js")).start(config, platform),
  webhooks: async (config, platform) => (await import("./services/webhooks/main.js")).start(config, platform),
};

/** One part of the distributed deployment. */
export function startPart(name: ProcessName, config: Config, platform: Platform): Promise<Running> {
  return name === "gateway" ? startGateway(config, platform) : serviceStarts[name](config, platform);
}

/** The five parts of one process: the gateway, and the services in `serviceNames` order. */
export type AllParts = { gateway: RunningGateway; services: Running[] };

/**
 * The embedded default's composition: the four services on loopback ports of their own, then the
 * gateway. start.ts runs it behind its banner; the route tests run it inside the test process.
 */
export async function startAll(config: Config, platform: Platform): Promise<AllParts> {
  // Each service on its own loopback port (MARKERS_PORT, ...: fixed by default, so that a gRPC
  // client can call it straight, not through the gateway's forwarder); the gateway is told where.
  // The services look each other and the gateway up (lib/rpc/peers.ts) where these say at the time
  // of each call: filled in once each listens, before the gateway lets a request in.
  const serviceUrls = { ...config.serviceUrls };
  let gatewayInternalUrl = config.gateway.internalUrl;
  const gatewayConfig = {
    replicas: config.gateway.replicas,
    get internalUrl() {
      return gatewayInternalUrl;
    },
  };
  const services = await Promise.all(
    serviceNames.map((service) =>
      serviceStarts[service](
        {
          ...config,
          serviceUrls,
          gateway: gatewayConfig,
          http: { ...config.http, port: config.http.servicePorts[service], internalHost: EMBEDDED_SERVICE_HOST },
        },
        platform,
      ),
    ),
  );
  serviceNames.forEach((service, i) => {
    serviceUrls[service] = services[i]?.url as string;
  });
  const gateway = await startGateway({ ...config, serviceUrls }, platform);
  gatewayInternalUrl = gateway.internalUrl;
  return { gateway, services };
}
