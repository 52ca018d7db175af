import { type RunningGateway, start as startGateway } from "./gateway/main.js";
import { type Config, type ServiceName, serviceNames } from "./lib/config.js";
import type { Platform } from "./lib/platform.js";
import { EMBEDDED_SERVICE_HOST } from "./lib/ports.js";
import type { Running } from "./lib/service-host.js";
import { start as startMarkers } from "./services/markers/main.js";
import { start as startReplays } from "./services/replays/main.js";
import { start as startServers } from "./services/servers/main.js";
import { start as startWebhooks } from "./services/webhooks/main.js";

/** Each service's own start(config, platform). */
export const serviceStarts: Record<ServiceName, (config: Config, platform: Platform) => Promise<Running>> = {
  markers: startMarkers,
  servers: startServers,
  replays: startReplays,
  webhooks: startWebhooks,
};

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
