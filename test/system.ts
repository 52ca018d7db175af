import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { deleteNamespaceStreams } from "../lib/bus/_testing.js";
import { internalTokenInterceptor } from "../lib/rpc/internal-token.js";
import { freePorts, freeServicePorts } from "./free-port.js";
import { accepts } from "./nats-server.js";
import { waitFor } from "./poll.js";

/**
 * The end-to-end harness: boots the real system from the compiled entry (`dist/start.js`, built by
 * `npm test`'s pretest) and talks to it only as users do: HTTP to the gateway and the internal
 * admin API (replayctl's). Two modes, as ARCHITECTURE.md "Two ways to run" describes:
 * - embedded: `node dist/start.js`, one process, embedded Postgres and in-process bus;
 * - distributed: five processes (`start.js <name>`, and more gateway replicas on request) against
 *   a fresh database on DATABASE_URL and a private namespace on NATS_URL.
 */
/** What tests need of a running system to talk to it; a System, or a shared one (shared-system.ts). */
export type SystemHandle = Pick<
  System,
  | "mode"
  | "baseUrl"
  | "gatewayUrls"
  | "internalUrl"
  | "databaseUrl"
  | "serviceUrls"
  | "ownServiceUrls"
  | "natsNamespace"
  | "admin"
  | "blobDir"
>;

export type System = {
  mode: "embedded" | "distributed";
  /** The first gateway's public address. */
  baseUrl: string;
  /** Every gateway replica's public address (one in embedded mode). */
  gatewayUrls: string[];
  internalUrl: string;
  /** The system's own database (distributed mode), for tests and benchmarks that seed or inspect it. */
  databaseUrl: string | undefined;
  /** Distributed mode: each service's own address, and the NATS namespace the system publishes under. */
  serviceUrls: Record<string, string> | undefined;
  /**
   * Each service's own port in both modes (embedded: MARKERS_PORT, ... as the harness chose them),
   * for clients that call a service straight rather than through the gateway's internal port.
   */
  ownServiceUrls: Record<string, string>;
  natsNamespace: string | undefined;
  /** The directory of the system's blob store (replay archives), for tests that look at what it holds. */
  blobDir: string;
  admin: Client<typeof IdentityAdminService>;
  /** What the processes printed, for failure messages. */
  output(): string;
  /** What the first process printed on stdout only (its log lines). */
  stdout(): string;
  /** Fault tests: SIGKILLs one process ("servers", "gateway-0", ...) and waits for it to die. */
  kill(name: string): Promise<void>;
  /** Fault tests: starts a killed process again and waits until the first gateway is ready again. */
  restart(name: string): Promise<void>;
  /** Fault tests: SIGSTOP (`stalled`) or SIGCONT one process: it holds its connections and answers nothing. */
  stall(name: string, stalled: boolean): void;
  /** SIGTERM everything, wait for exits, drop the database; resolves to each process's exit code. */
  stop(): Promise<(number | null)[]>;
  [Symbol.asyncDispose](): Promise<void>;
};

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
const entry = join(root, "dist", "start.js");
// A deadline for a system that never comes up, not a measure of start-up: at load average ~30 on
// this 2-core machine the embedded system took over a minute to answer /readyz.
const READY_TIMEOUT_MS = 180_000;

/** Why distributed tests cannot run here, or undefined when they can. */
export function distributedSkipReason(): string | undefined {
  if (!process.env.DATABASE_URL || !process.env.NATS_URL) {
    return "distributed mode needs DATABASE_URL and NATS_URL (real Postgres and NATS); unset here";
  }
  return undefined;
}

type Proc = {
  name: string;
  child: ChildProcess;
  output: string[];
  stdout: string[];
  /** Starts the same process again (fault tests), keeping its name and output. */
  relaunch(): void;
};

function launch(name: string, args: string[], env: Record<string, string>, nodeArgs: readonly string[] = []): Proc {
  const spawnChild = () =>
    spawn(process.execPath, [...nodeArgs, entry, ...args], {
      cwd: root,
      env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
  const keep = (lines: string[]) => (chunk: Buffer) => {
    lines.push(chunk.toString());
    if (lines.length > 400) lines.shift();
  };
  const attach = (proc: Proc) => {
    proc.child.stdout?.on("data", keep(proc.output));
    proc.child.stdout?.on("data", keep(proc.stdout));
    proc.child.stderr?.on("data", keep(proc.output));
  };
  const proc: Proc = {
    name,
    child: spawnChild(),
    output: [],
    stdout: [],
    relaunch() {
      proc.child = spawnChild();
      attach(proc);
    },
  };
  attach(proc);
  return proc;
}

async function waitReady(url: string, procs: Proc[]): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = "no answer";
  while (Date.now() < deadline) {
    const dead = procs.find((p) => p.child.exitCode !== null);
    if (dead)
      throw new Error(`${dead.name} exited (${dead.child.exitCode}) before ${url} was ready:\n${dead.output.join("")}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      last = String(res.status);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch (err) {
      last = String((err as Error).message);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `${url} not ready after ${READY_TIMEOUT_MS} ms (last: ${last}):\n${procs.map((p) => p.output.join("")).join("\n")}`,
  );
}

/** Waits until `proc` accepts connections on `port` (it listens once it is ready to serve). */
async function waitAccepting(port: number, proc: Proc): Promise<void> {
  await waitFor(
    `${proc.name} listening on ${port}`,
    async () => {
      if (proc.child.exitCode !== null)
        throw new Error(`${proc.name} exited before it listened:\n${proc.output.join("")}`);
      return accepts(port);
    },
    READY_TIMEOUT_MS,
  );
}

async function stopAll(procs: Proc[]): Promise<(number | null)[]> {
  return Promise.all(
    procs.map(
      (p) =>
        new Promise<number | null>((resolve) => {
          if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve(p.child.exitCode);
          const kill = setTimeout(() => p.child.kill("SIGKILL"), 15_000);
          p.child.once("exit", (code) => {
            clearTimeout(kill);
            resolve(code);
          });
          p.child.kill("SIGTERM");
        }),
    ),
  );
}

/** The admin API's client; `token` is the system's INTERNAL_TOKEN when it was started with one. */
export function adminClient(internalUrl: string, token?: string): Client<typeof IdentityAdminService> {
  const interceptors = token ? [internalTokenInterceptor(token)] : [];
  return createClient(
    IdentityAdminService,
    createConnectTransport({ baseUrl: internalUrl, httpVersion: "2", interceptors }),
  );
}

function system(
  mode: System["mode"],
  gatewayUrls: string[],
  internalUrl: string,
  blobDir: string,
  procs: Proc[],
  cleanup: () => Promise<void>,
  ownServiceUrls: Record<string, string>,
  distributed?: { databaseUrl: string; serviceUrls: Record<string, string>; natsNamespace: string },
  internalToken?: string,
): System {
  let stopped: Promise<(number | null)[]> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      const codes = await stopAll(procs);
      await cleanup();
      return codes;
    })());
  return {
    mode,
    baseUrl: gatewayUrls[0] as string,
    gatewayUrls,
    internalUrl,
    databaseUrl: distributed?.databaseUrl,
    serviceUrls: distributed?.serviceUrls,
    ownServiceUrls,
    natsNamespace: distributed?.natsNamespace,
    blobDir,
    admin: adminClient(internalUrl, internalToken),
    output: () => procs.map((p) => `--- ${p.name}\n${p.output.join("")}`).join("\n"),
    stdout: () => procs[0]?.stdout.join("") ?? "",
    async kill(name) {
      const proc = procs.find((p) => p.name === name);
      if (!proc) throw new Error(`no process ${name}`);
      if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        proc.child.once("exit", () => resolve());
        proc.child.kill("SIGKILL");
      });
    },
    stall(name, stalled) {
      const proc = procs.find((p) => p.name === name);
      if (!proc) throw new Error(`no process ${name}`);
      proc.child.kill(stalled ? "SIGSTOP" : "SIGCONT");
    },
    async restart(name) {
      const proc = procs.find((p) => p.name === name);
      if (!proc) throw new Error(`no process ${name}`);
      if (proc.child.exitCode === null && proc.child.signalCode === null) throw new Error(`${name} is still running`);
      proc.relaunch();
      // The gateway's readiness answer may be a second old (gateway/main.ts): a service is first
      // waited for on its own port, so a stale "ready" from before the kill cannot end the wait.
      const own = ownServiceUrls[name];
      if (own) await waitAccepting(Number(new URL(own).port), proc);
      await waitReady(`${gatewayUrls[0]}/readyz`, procs);
    },
    stop,
    async [Symbol.asyncDispose]() {
      await stop();
    },
  };
}

/** `npm start` as a user runs it: one process on a fresh DATA_DIR. */
export async function startEmbeddedSystem(env: Record<string, string> = {}): Promise<System> {
  const dataDir = await mkdtemp(join(tmpdir(), "replay-e2e-"));
  const [port, internalPort] = await freePorts(2);
  const services = await freeServicePorts();
  const proc = launch("embedded", [], {
    PORT: String(port),
    INTERNAL_PORT: String(internalPort),
    DATA_DIR: dataDir,
    ...services.env,
    ...env,
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const cleanup = () => rm(dataDir, { recursive: true, force: true });
  try {
    await waitReady(`${baseUrl}/readyz`, [proc]);
  } catch (err) {
    await stopAll([proc]);
    await cleanup();
    throw err;
  }
  const internalUrl = `http://127.0.0.1:${internalPort}`;
  const blobDir = env.BLOB_URL ? fileURLToPath(env.BLOB_URL) : join(env.DATA_DIR ?? dataDir, "blobs");
  return system(
    "embedded",
    [baseUrl],
    internalUrl,
    blobDir,
    [proc],
    cleanup,
    services.urls,
    undefined,
    env.INTERNAL_TOKEN,
  );
}

/** A fresh database beside DATABASE_URL's, so each system starts from empty schemas. */
export async function createDatabase(baseUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `e2e_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * The distributed deployment: markers, servers, replays and webhooks, then `gateways` gateway
 * replicas (GATEWAY_REPLICAS set to match), each its own process.
 */
export async function startDistributedSystem({
  gateways = 1,
  webhooksReplicas = 1,
  env = {},
  nodeArgs = [],
  natsUrl = process.env.NATS_URL,
  launched,
}: {
  gateways?: number;
  /** Webhooks processes: the first at WEBHOOKS_URL, the others beside it ("webhooks-1", ...), sharing its consumer and queue. */
  webhooksReplicas?: number;
  /** The NATS server (NATS_URL by default); the system gets a namespace of its own on it, deleted on stop. */
  natsUrl?: string;
  env?: Record<string, string>;
  /** Extra node flags for every process, e.g. ["--cpu-prof", "--cpu-prof-dir=/tmp/prof"] to profile. */
  nodeArgs?: readonly string[];
  /** Called once every process is spawned, before any is ready: each one's output so far, by name. */
  launched?: (outputs: () => Map<string, string>) => void;
} = {}): Promise<System> {
  if (!process.env.DATABASE_URL || !natsUrl)
    throw new Error("the distributed mode needs DATABASE_URL and a NATS server");
  const database = await createDatabase(process.env.DATABASE_URL as string);
  const namespace = `e2e_${randomBytes(4).toString("hex")}`;
  // The replays service's blob store, on a directory of this system's own (removed on stop).
  const blobDir = await mkdtemp(join(tmpdir(), "replay-e2e-blobs-"));
  const names = ["markers", "servers", "replays", "webhooks"] as const;
  const ports = await freePorts(names.length + gateways * 2 + webhooksReplicas - 1);
  const shared = {
    DATABASE_URL: database.url,
    NATS_URL: natsUrl,
    NATS_NAMESPACE: namespace,
    GATEWAY_REPLICAS: String(gateways),
    // Replicas that share no DATA_DIR share the page token key, as in Kubernetes.
    PAGE_TOKEN_KEY: randomBytes(32).toString("base64"),
    // The gateway and webhooks processes seal secrets at rest under one shared key.
    SECRETS_KEY: randomBytes(32).toString("base64"),
    BLOB_URL: pathToFileURL(blobDir).href,
    ...Object.fromEntries(names.map((name, i) => [`${name.toUpperCase()}_URL`, `http://127.0.0.1:${ports[i]}`])),
    // The first gateway's internal port, where the services look tenants' plans up.
    GATEWAY_INTERNAL_URL: `http://127.0.0.1:${ports[names.length + 1]}`,
    ...env,
  };
  const procs: Proc[] = names.map((name, i) => launch(name, [name], { ...shared, PORT: String(ports[i]) }, nodeArgs));
  for (let w = 1; w < webhooksReplicas; w++) {
    const port = ports[names.length + gateways * 2 + w - 1] as number;
    procs.push(launch(`webhooks-${w}`, ["webhooks"], { ...shared, PORT: String(port) }, nodeArgs));
  }
  const gatewayUrls: string[] = [];
  const internalUrls: string[] = [];
  for (let g = 0; g < gateways; g++) {
    const port = ports[names.length + g * 2] as number;
    const internalPort = ports[names.length + g * 2 + 1] as number;
    procs.push(
      launch(
        `gateway-${g}`,
        ["gateway"],
        { ...shared, PORT: String(port), INTERNAL_PORT: String(internalPort) },
        nodeArgs,
      ),
    );
    gatewayUrls.push(`http://127.0.0.1:${port}`);
    internalUrls.push(`http://127.0.0.1:${internalPort}`);
  }
  launched?.(() => new Map(procs.map((p) => [p.name, p.output.join("")])));
  const cleanup = async () => {
    await database.drop();
    await deleteNamespaceStreams(natsUrl, namespace);
    await rm(blobDir, { recursive: true, force: true });
  };
  try {
    for (const url of gatewayUrls) await waitReady(`${url}/readyz`, procs);
  } catch (err) {
    await stopAll(procs);
    await cleanup();
    throw err;
  }
  // The extra webhooks replicas by their process names ("webhooks-1", ...).
  const serviceUrls = Object.fromEntries([
    ...names.map((name, i) => [name, `http://127.0.0.1:${ports[i]}`]),
    ...Array.from({ length: webhooksReplicas - 1 }, (_, w) => [
      `webhooks-${w + 1}`,
      `http://127.0.0.1:${ports[names.length + gateways * 2 + w]}`,
    ]),
  ]);
  return system(
    "distributed",
    gatewayUrls,
    internalUrls[0] as string,
    fileURLToPath(shared.BLOB_URL),
    procs,
    cleanup,
    serviceUrls,
    {
      databaseUrl: database.url,
      serviceUrls,
      natsNamespace: namespace,
    },
    env.INTERNAL_TOKEN,
  );
}
