import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { freePorts } from "../free-port.js";
import { accepts, natsServer, natsServerBinary } from "../nats-server.js";
import { createDatabase } from "../system.js";
import { createSupervisor, type Death, type Supervisor } from "./supervisor.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";

/**
 * The distributed deployment with two replicas of every process, wired as in Kubernetes: a
 * balancer (a Service) in front of each pair, and each kind of process reaching Postgres and NATS
 * through a link of its own (a TcpProxy the fault schedule can stall). Postgres is the machine's
 * (a fresh database); NATS is a private nats-server the schedule can crash.
 */
export const kinds = ["markers", "servers", "replays", "webhooks", "gateway"] as const;
export type Kind = (typeof kinds)[number];
const serviceKinds = kinds.filter((k) => k !== "gateway");
export const REPLICAS = 2;

export type Cluster = {
  publicUrl: string;
  internalUrl: string;
  /** The soak's own database, reached directly (not through a link), for settling and checking. */
  databaseUrl: string;
  databaseName: string;
  natsUrl: string;
  natsNamespace: string;
  processNames: string[];
  kindOf(name: string): Kind;
  /** Each kind's links to Postgres and NATS. */
  links: Record<Kind, { pg: TcpProxy; nats: TcpProxy }>;
  supervisor: Supervisor;
  nats: { kill(): Promise<void>; start(): Promise<void> };
  logDir: string;
  /** SIGTERM every process; each one's exit code. */
  stop(): Promise<Record<string, number | null>>;
  /** Drops the database, the NATS store and the blob dir, and closes the proxies (logs are kept). */
  cleanup(): Promise<void>;
};

const root = fileURLToPath(new URL("../../..", import.meta.url));
const READY_TIMEOUT_MS = 90_000;

export async function startCluster(options: {
  baseDatabaseUrl: string;
  logDir: string;
  env: Record<string, string>;
  onDeath(death: Death): void;
}): Promise<Cluster> {
  const binary = natsServerBinary();
  if (!binary) throw new Error("no nats-server binary (the soak crashes a private one)");
  const cleanups: (() => Promise<unknown>)[] = [];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };
  try {
    const ports = [...(await freePorts(40))];
    const take = () => ports.shift() as number;

    const database = await createDatabase(options.baseDatabaseUrl);
    cleanups.push(() => database.drop());
    const storeDir = await mkdtemp(join(tmpdir(), "soak-nats-"));
    cleanups.push(() => rm(storeDir, { recursive: true, force: true }));
    const nats = natsServer(binary, take(), storeDir);
    cleanups.push(() => nats.kill());
    await nats.start();
    const blobDir = await mkdtemp(join(tmpdir(), "soak-blobs-"));
    cleanups.push(() => rm(blobDir, { recursive: true, force: true }));

    const proxies: TcpProxy[] = [];
    cleanups.push(() => Promise.all(proxies.map((p) => p.close())));
    const proxy = async (name: string, upstreamPorts: number[]) => {
      const p = await startTcpProxy({
        name,
        port: take(),
        upstreams: upstreamPorts.map((port) => ({ host: "127.0.0.1", port })),
      });
      proxies.push(p);
      return p;
    };

    const pgUrl = new URL(options.baseDatabaseUrl);
    const natsPort = Number(new URL(nats.url).port);
    const links = {} as Cluster["links"];
    for (const kind of kinds) {
      links[kind] = {
        pg: await proxy(`${kind}->postgres`, [Number(pgUrl.port || 5432)]),
        nats: await proxy(`${kind}->nats`, [natsPort]),
      };
    }

    // Each replica's own ports, then the balancers in front of each pair.
    const replicaPorts = Object.fromEntries(kinds.map((k) => [k, [take(), take()]])) as Record<Kind, number[]>;
    const gatewayInternalPorts = [take(), take()];
    const balancers: Record<string, TcpProxy> = {};
    for (const kind of serviceKinds) balancers[kind] = await proxy(`${kind}-service`, replicaPorts[kind]);
    const publicLb = await proxy("gateway-public", replicaPorts.gateway);
    const internalLb = await proxy("gateway-internal", gatewayInternalPorts);

    const natsNamespace = `soak_${randomBytes(4).toString("hex")}`;
    const shared: Record<string, string> = {
      LOG_LEVEL: "warn",
      NATS_NAMESPACE: natsNamespace,
      GATEWAY_REPLICAS: String(REPLICAS),
      PAGE_TOKEN_KEY: randomBytes(32).toString("base64"),
      SECRETS_KEY: randomBytes(32).toString("base64"),
      BLOB_URL: pathToFileURL(blobDir).href,
      ...Object.fromEntries(
        serviceKinds.map((k) => [`${k.toUpperCase()}_URL`, `http://127.0.0.1:${balancers[k]?.port}`]),
      ),
      GATEWAY_INTERNAL_URL: `http://127.0.0.1:${internalLb.port}`,
      ...options.env,
    };
    const databaseName = new URL(database.url).pathname.slice(1);
    const envOf = (kind: Kind) => {
      const db = new URL(database.url);
      db.host = `127.0.0.1:${links[kind].pg.port}`;
      return { ...shared, DATABASE_URL: db.toString(), NATS_URL: `nats://127.0.0.1:${links[kind].nats.port}` };
    };

    const supervisor = createSupervisor({
      entry: join(root, "dist", "start.js"),
      cwd: root,
      logDir: options.logDir,
      onDeath: options.onDeath,
    });
    cleanups.push(() => supervisor.stopAll());
    const kindByName = new Map<string, Kind>();
    for (const kind of kinds) {
      for (let r = 0; r < REPLICAS; r++) {
        const name = `${kind}-${r}`;
        kindByName.set(name, kind);
        const port = String(replicaPorts[kind][r]);
        const env =
          kind === "gateway"
            ? { ...envOf(kind), PORT: port, INTERNAL_PORT: String(gatewayInternalPorts[r]) }
            : { ...envOf(kind), PORT: port };
        supervisor.add(name, [kind], env);
      }
    }
    // Services first (each pair migrates its schema under a lock), then the gateways.
    for (const name of supervisor.names()) if (kindByName.get(name) !== "gateway") supervisor.start(name);
    for (const kind of serviceKinds) for (const port of replicaPorts[kind]) await waitListening(port, supervisor);
    for (const name of supervisor.names()) if (kindByName.get(name) === "gateway") supervisor.start(name);
    for (const port of replicaPorts.gateway) await waitReady(`http://127.0.0.1:${port}/readyz`, supervisor);

    return {
      publicUrl: `http://127.0.0.1:${publicLb.port}`,
      internalUrl: `http://127.0.0.1:${internalLb.port}`,
      databaseUrl: database.url,
      databaseName,
      natsUrl: nats.url,
      natsNamespace,
      processNames: supervisor.names(),
      kindOf: (name) => kindByName.get(name) as Kind,
      links,
      supervisor,
      nats: { kill: () => nats.kill(), start: () => nats.start() },
      logDir: options.logDir,
      stop: () => supervisor.stopAll(),
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function waitListening(port: number, supervisor: Supervisor): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await accepts(port)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`port ${port} not listening after ${READY_TIMEOUT_MS} ms:\n${tails(supervisor)}`);
}

async function waitReady(url: string, supervisor: Supervisor): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} not ready after ${READY_TIMEOUT_MS} ms:\n${tails(supervisor)}`);
}

const tails = (supervisor: Supervisor) =>
  supervisor
    .names()
    .map((n) => `--- ${n}\n${supervisor.tail(n)}`)
    .join("\n");
