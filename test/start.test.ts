// Starting the process as a user does (`node dist/start.js`): a port that is taken fails at once,
// before the embedded database is created or locked; a start that fails after taking DATA_DIR's
// lock leaves none behind; a damaged initdb template costs an initdb, not the start.
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";
import { serviceNames, servicePortVariable } from "../lib/config.js";
import { defaultTemplateDir, ensureTemplate, templatePath } from "../lib/db/embedded-template.js";
import { freePorts, freeServicePorts } from "./free-port.js";
import { pollUntil } from "./poll.js";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
const entry = join(root, "dist", "start.js");

type Started = { child: ChildProcess; stdout: () => string; stderr: () => string; exited: Promise<number | null> };

/** The embedded services on ports of the OS's choosing unless a test names them: on their defaults, starts side by side would meet. */
const anyServicePorts = Object.fromEntries(serviceNames.map((service) => [servicePortVariable(service), "0"]));

function start(args: string[], env: Record<string, string>): Started {
  const child = spawn(process.execPath, [entry, ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "info", ...(args.length === 0 ? anyServicePorts : {}), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out: string[] = [];
  const err: string[] = [];
  child.stdout?.on("data", (chunk: Buffer) => out.push(chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => err.push(chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
  });
  return { child, stdout: () => out.join(""), stderr: () => err.join(""), exited };
}

/** Resolves once the process answers /readyz with 200; fails if it exits first. */
async function ready(started: Started, port: number): Promise<void> {
  await pollUntil(
    async () => {
      if (started.child.exitCode !== null)
        throw new Error(`exited (${started.child.exitCode}):\n${started.stdout()}\n${started.stderr()}`);
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      await res?.arrayBuffer();
      return res?.status;
    },
    (status) => status === 200,
    60_000,
    50,
  );
}

async function stop(started: Started): Promise<number | null> {
  started.child.kill("SIGTERM");
  return started.exited;
}

async function occupy(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return server;
}

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe("start-up", () => {
  it("refuses a busy PORT in one stderr line naming it, before creating or locking the database", async () => {
    const dataDir = await tempDir("replay-start-");
    const [port, internalPort] = (await freePorts(2)) as [number, number];
    await occupy(port);

    const refused = start([], { PORT: String(port), INTERNAL_PORT: String(internalPort), DATA_DIR: dataDir });
    expect(await refused.exited).toBe(1);
    const lines = refused.stderr().trim().split("\n");
    expect(lines, refused.stderr()).toHaveLength(1);
    expect(lines[0]).toBe(
      `port ${port} on 127.0.0.1 (PORT) is already in use: stop what listens there, or set PORT to a free port`,
    );
    // Nothing was created: no cluster, no lock (the check comes before the database, initdb or a copy).
    // An empty DATA_DIR is where every start below begins, so a second start here would prove nothing more.
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("refuses a busy service port in one stderr line naming its variable, before creating the database", async () => {
    const dataDir = await tempDir("replay-start-");
    const [port, internalPort, servers] = (await freePorts(3)) as [number, number, number];
    await occupy(servers);
    const refused = start([], {
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      DATA_DIR: dataDir,
      SERVERS_PORT: String(servers),
    });
    expect(await refused.exited).toBe(1);
    expect(refused.stderr().trim()).toBe(
      `port ${servers} on 127.0.0.1 (SERVERS_PORT) is already in use: stop what listens there, or set SERVERS_PORT to a free port`,
    );
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("names INTERNAL_PORT when the internal port is the busy one, and refuses PORT and INTERNAL_PORT set to one port", async () => {
    const dataDir = await tempDir("replay-start-");
    const [port, internalPort, samePort] = (await freePorts(3)) as [number, number, number];
    await occupy(internalPort);
    // Side by side, on ports of their own: neither creates anything, and each spends its time loading modules.
    const busy = start([], { PORT: String(port), INTERNAL_PORT: String(internalPort), DATA_DIR: dataDir });
    const same = start([], { PORT: String(samePort), INTERNAL_PORT: String(samePort), DATA_DIR: dataDir });
    expect(await busy.exited).toBe(1);
    expect(busy.stderr().trim()).toBe(
      `port ${internalPort} on 127.0.0.1 (INTERNAL_PORT) is already in use: stop what listens there, or set INTERNAL_PORT to a free port`,
    );
    expect(await same.exited).toBe(1);
    expect(same.stderr().trim()).toBe(
      `port ${samePort} on 127.0.0.1 (INTERNAL_PORT) is already in use: stop what listens there, or set INTERNAL_PORT to a free port`,
    );
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("refuses a service's busy PORT (distributed mode) before connecting to Postgres or NATS", async () => {
    const [port] = (await freePorts(1)) as [number];
    await occupy(port);
    // Nothing answers on these addresses: only a check made before connecting can name the port.
    const refused = start(["servers"], {
      PORT: String(port),
      DATABASE_URL: "postgres://postgres@127.0.0.1:1/none",
      NATS_URL: "nats://127.0.0.1:1",
    });
    expect(await refused.exited).toBe(1);
    expect(refused.stderr().trim()).toBe(
      `port ${port} on 127.0.0.1 (PORT) is already in use: stop what listens there, or set PORT to a free port`,
    );
  });

  it("a start that fails after locking DATA_DIR leaves no lock; the next start on it comes up, each service on the port its variable names", async () => {
    const dataDir = await tempDir("replay-start-");
    const [port, internalPort] = (await freePorts(2)) as [number, number];
    const env = { PORT: String(port), INTERNAL_PORT: String(internalPort), DATA_DIR: dataDir };
    // The replays service reads its page token key file after the database is open and migrated.
    const failed = start([], { ...env, PAGE_TOKEN_KEY_FILE: join(dataDir, "no-such-key") });
    expect(await failed.exited).toBe(1);
    expect(failed.stdout()).toMatch(/"msg":"failed to start"/);
    expect(existsSync(join(dataDir, "pg", "PG_VERSION")), "the database was created before the failure").toBe(true);
    expect(existsSync(join(dataDir, "pg", "replay.lock"))).toBe(false);

    // The four services on the ports their variables name, printed in the banner; with an internal
    // token, the first start still makes the dev tenant (it calls the admin API with the token).
    const services = await freeServicePorts();
    const started = start([], { ...env, ...services.env, INTERNAL_TOKEN: "start-test-internal-token-0123456789" });
    await ready(started, port);
    // The banner is complete once the process logs "ready" (the gateway answers /readyz before).
    await pollUntil(
      async () => started.stdout(),
      (out) => out.includes('"msg":"ready"'),
      30_000,
    );
    expect(started.stderr()).toMatch(/^ +dev tenant \(first start; the secrets are shown only now\):$/m);
    expect(started.stderr()).toMatch(/^ +API key: +\S+ +\(all scopes\)$/m);
    for (const service of serviceNames) {
      const line = new RegExp(`^ +${service}: +${services.urls[service]} \\(${servicePortVariable(service)}\\)$`, "m");
      expect(started.stderr()).toMatch(line);
      const health = await fetch(`${services.urls[service]}/grpc.health.v1.Health/Check`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(await health.json()).toEqual({ status: "SERVING" });
    }
    expect(await stop(started)).toBe(0);
  }, 90_000);

  it("a damaged initdb template costs an initdb, not the start: the system comes up and serves", async () => {
    const { dir } = await ensureTemplate(defaultTemplateDir());
    const cache = await tempDir("replay-start-template-");
    cpSync(dir, templatePath(cache), { recursive: true });
    const control = join(templatePath(cache), "pgdata", "global", "pg_control");
    const bytes = readFileSync(control);
    bytes[64] = (bytes[64] as number) ^ 0xff;
    writeFileSync(control, bytes);
    const dataDir = await tempDir("replay-start-");
    const [port, internalPort] = (await freePorts(2)) as [number, number];
    const started = start([], {
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      DATA_DIR: dataDir,
      EMBEDDED_TEMPLATE_DIR: cache,
    });
    await ready(started, port);
    const line = started
      .stdout()
      .split("\n")
      .find((l) => l.includes("embedded database created by initdb"));
    expect(line, started.stdout()).toBeDefined();
    expect(JSON.parse(line as string).reason).toMatch(/does not match its manifest \(damaged\)/);
    // It serves from that database: the dev tenant's key (printed once the start is done) lists its servers.
    const key = await pollUntil(
      async () => /API key:\s+(\S+)/.exec(started.stderr())?.[1],
      (found) => found !== undefined,
      30_000,
    );
    const res = await fetch(`http://127.0.0.1:${port}/v1/api/servers`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ servers: [] });
    expect(await stop(started)).toBe(0);
  }, 90_000);
});
