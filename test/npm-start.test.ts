// `npm start` as a user runs and stops it: SIGTERM to npm's own pid (`npm start & …; kill $!`) must
// stop the system too, not leave it holding its ports and DATA_DIR's lock.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";
import { freePorts, freeServicePorts } from "./free-port.js";
import { pollUntil } from "./poll.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** The pid's state letter in /proc ("Z" for a zombie), or undefined once it is gone. */
function procState(pid: number): string | undefined {
  try {
    return /^\d+ \(.*\) (\S)/s.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

const running = (pid: number) => procState(pid) !== undefined && procState(pid) !== "Z";

/** Every live descendant of pid, from /proc (each process's parent is field 4 of its stat line). */
function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const ppid = /^\d+ \(.*\) \S (\d+)/s.exec(readFileSync(`/proc/${name}/stat`, "utf8"))?.[1];
      if (ppid !== undefined) parentOf.set(Number(name), Number(ppid));
    } catch {
      // Gone while we looked.
    }
  }
  const found: number[] = [];
  for (let frontier = [pid]; frontier.length > 0; ) {
    const next = [...parentOf].filter(([, ppid]) => frontier.includes(ppid)).map(([child]) => child);
    found.push(...next);
    frontier = next;
  }
  return found;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

describe.skipIf(process.platform !== "linux")("npm start (Linux: reads /proc)", () => {
  it("stops the system, freeing its ports and DATA_DIR's lock, when npm itself gets SIGTERM", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "replay-npm-start-"));
    const [port, internalPort] = (await freePorts(2)) as [number, number];
    const services = await freeServicePorts();
    // The embedded default, as a user starts it: without the distributed mode's variables.
    const { DATABASE_URL: _db, NATS_URL: _nats, NATS_NAMESPACE: _ns, ...env } = process.env;
    // Without prestart's build: dist/ is built already, and a build here would compile whatever the
    // checkout holds at the time. The start script runs as ever, npm -> sh -> node.
    const npm = spawn("npm", ["start", "--ignore-scripts"], {
      cwd: root,
      env: {
        ...env,
        PORT: String(port),
        INTERNAL_PORT: String(internalPort),
        ...services.env,
        DATA_DIR: dataDir,
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const output: string[] = [];
    npm.stdout.on("data", (chunk: Buffer) => output.push(chunk.toString()));
    npm.stderr.on("data", (chunk: Buffer) => output.push(chunk.toString()));
    const npmPid = npm.pid as number;
    let systemPid: number | undefined;
    onTestFinished(async () => {
      // Whatever this test started is gone before the next one runs, even when it failed.
      for (const pid of [...descendants(npmPid), npmPid, ...(systemPid ? [systemPid] : [])]) {
        if (running(pid)) process.kill(pid, "SIGKILL");
      }
      await rm(dataDir, { recursive: true, force: true });
    });

    const lock = join(dataDir, "pg", "replay.lock");
    await pollUntil(
      async () => {
        if (npm.exitCode !== null) throw new Error(`npm start exited (${npm.exitCode}):\n${output.join("")}`);
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        await res?.arrayBuffer();
        return res?.status;
      },
      (status) => status === 200,
      90_000,
      100,
    );
    // The lock file holds the pid of the process that owns DATA_DIR: the system, below npm.
    systemPid = Number(readFileSync(lock, "utf8"));
    expect(descendants(npmPid), output.join("")).toContain(systemPid);

    process.kill(npmPid, "SIGTERM");
    await pollUntil(
      async () => ({ system: running(systemPid as number), port: await portFree(port), lock: existsSync(lock) }),
      (s) => !s.system && s.port && !s.lock,
      15_000,
      100,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}\n${output.join("")}`);
    });
    expect(await portFree(internalPort)).toBe(true);
    for (const url of Object.values(services.urls)) expect(await portFree(Number(new URL(url).port))).toBe(true);
    // It drained as on its own SIGTERM (operations.md: stop accepting, drain, exit 0), not killed.
    expect(output.join("")).toMatch(/"msg":"draining"/);
    expect(output.join(""), "no error or fatal line while stopping").not.toMatch(/"level":(50|60)/);
  }, 120_000);
});
