import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { type ServiceName, serviceNames, servicePortVariable } from "../lib/config.js";

/**
 * The first port of the kernel's ephemeral range (outgoing connections' local ports). A port the
 * OS picks with listen(0) comes from that range, and so can be taken as an outgoing connection's
 * local port between the test choosing it and the system under test binding it (a start then
 * fails with "port in use"); ports below the range are never handed out that way.
 */
function ephemeralStart(): number {
  try {
    const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    const value = Number(low);
    return Number.isInteger(value) && value > 20_000 ? value : 32_768;
  } catch {
    return 32_768;
  }
}

const LOWEST = 20_000;

function tryListen(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve(server));
  });
}

/** Ports free right now below the ephemeral range, chosen at random (all held open until every one is known). */
export async function freePorts(count: number): Promise<number[]> {
  const high = ephemeralStart();
  const held: Server[] = [];
  const ports: number[] = [];
  try {
    for (let attempts = 0; ports.length < count; attempts++) {
      if (attempts > 1_000) throw new Error(`no ${count} free ports between ${LOWEST} and ${high}`);
      const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
      if (ports.includes(port)) continue;
      const server = await tryListen(port);
      if (!server) continue;
      held.push(server);
      ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/**
 * MARKERS_PORT, SERVERS_PORT, REPLAYS_PORT and WEBHOOKS_PORT set to free ports, for an embedded
 * system started beside others: on their defaults (9091-9094) two would meet. Returns the variables
 * and the URL of each service's own port.
 */
export async function freeServicePorts(): Promise<{ env: Record<string, string>; urls: Record<ServiceName, string> }> {
  const ports = await freePorts(serviceNames.length);
  return {
    env: Object.fromEntries(serviceNames.map((service, i) => [servicePortVariable(service), String(ports[i])])),
    urls: Object.fromEntries(serviceNames.map((service, i) => [service, `http://127.0.0.1:${ports[i]}`])) as Record<
      ServiceName,
      string
    >,
  };
}
