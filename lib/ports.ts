import { createServer, type Server } from "node:net";
import { type Config, type ProcessName, serviceNames, servicePortVariable } from "./config.js";

export type Listener = { port: number; host: string; portVariable: string; hostVariable: string };

/** One line naming the port and the variable that sets it. */
export class PortError extends Error {
  override name = "PortError";
}

/** Where the embedded mode's services listen: loopback, whatever INTERNAL_HOST says. */
export const EMBEDDED_SERVICE_HOST = "127.0.0.1";

/** Ports chosen by the OS (0) are left out. */
export function plannedListeners(config: Config, processName: ProcessName | undefined): Listener[] {
  const { http } = config;
  const listeners: Listener[] =
    processName === undefined || processName === "gateway"
      ? [
          { port: http.port ?? 8080, host: http.host, portVariable: "PORT", hostVariable: "HOST" },
          {
            port: http.internalPort,
            host: http.internalHost,
            portVariable: "INTERNAL_PORT",
            hostVariable: "INTERNAL_HOST",
          },
          ...(processName === undefined
            ? serviceNames.map((service) => ({
                port: http.servicePorts[service],
                host: EMBEDDED_SERVICE_HOST,
                portVariable: servicePortVariable(service),
                hostVariable: "the embedded services' host",
              }))
            : []),
        ]
      : [{ port: http.port ?? 0, host: http.internalHost, portVariable: "PORT", hostVariable: "INTERNAL_HOST" }];
  return listeners.filter((listener) => listener.port !== 0);
}

/**
 * Before anything slow or stateful starts, so a busy port costs milliseconds and leaves nothing behind. All
 * are held at once, so two variables naming one port are caught too.
 */
export async function checkPortsFree(listeners: readonly Listener[]): Promise<void> {
  const held: Server[] = [];
  try {
    for (const listener of listeners) held.push(await bind(listener));
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

function bind(listener: Listener): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", (err) => reject(asPortError(err, [listener]) ?? err));
    server.listen({ port: listener.port, host: listener.host, exclusive: true }, () => resolve(server));
  });
}

/** Undefined for anything but a listen error on one of `listeners`' ports. */
export function asPortError(err: unknown, listeners: readonly Listener[]): PortError | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const { code, port } = err as NodeJS.ErrnoException & { port?: number };
  const listener =
    listeners.find((candidate) => candidate.port === port) ?? (listeners.length === 1 ? listeners[0] : undefined);
  if (!listener) return undefined;
  const where = `port ${listener.port} on ${listener.host} (${listener.portVariable})`;
  switch (code) {
    case "EADDRINUSE":
      return new PortError(
        `${where} is already in use: stop what listens there, or set ${listener.portVariable} to a free port`,
      );
    case "EACCES":
      return new PortError(
        `${where} needs privileges this process does not have: set ${listener.portVariable} to a port above 1023`,
      );
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new PortError(
        `${listener.hostVariable} ${listener.host} is not an address of this machine, so ${listener.portVariable} ${listener.port} cannot be listened on: set ${listener.hostVariable} to one (127.0.0.1, 0.0.0.0)`,
      );
    default:
      return undefined;
  }
}
