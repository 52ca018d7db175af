import type { RunningGateway } from "./gateway/main.js";
import type { Config, ProcessName } from "./lib/config.js";
import { serviceNames } from "./lib/config.js";
import type { Platform } from "./lib/platform.js";
import { EMBEDDED_SERVICE_HOST } from "./lib/ports.js";
import type { Running } from "./lib/service-host.js";

type Start = (config: Config, platform: Platform) => Promise<Running>;

// Each part's code is loaded when it starts: a process of the distributed deployment parses its own
// part only (a service ~0.4-0.6 s of CPU to load, all five ~0.8 s), and a refused start none of them.
const loadGateway = () => import("./gateway/main.js");
const loadPart: Record<ProcessName, () => Promise<{ start: Start }>> = {
  gateway: loadGateway,
  markers: () => import("./services/markers/main.js"),
  servers: () => import("./services/servers/main.js"),
  replays: () => import("./services/replays/main.js"),
  webhooks: () => import("./services/webhooks/main.js"),
};

/** One part of the distributed deployment. */
export async function startPart(name: ProcessName, config: Config, platform: Platform): Promise<Running> {
  return (await loadPart[name]()).start(config, platform);
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
      startPart(
        service,
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
  const gateway = await (await loadGateway()).start({ ...config, serviceUrls }, platform);
  gatewayInternalUrl = gateway.internalUrl;
  return { gateway, services };
}
