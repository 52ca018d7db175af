import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type CpuGroup, findChildPids } from "./proc.js";

/** A baseline server process of a benchmark: its URL, its pid (for CPU accounting), and how to stop it. */
export type ChildServer = { url: string; pid: number; stop(): Promise<void> };

/**
 * Starts `<entry>.js` beside this module (a baseline server) with only PATH and `env`; resolves once
 * it prints {"port":N}. SIGTERM stops it, SIGKILL after 10 s.
 */
export function startChildServer(entry: string, env: Record<string, string>): Promise<ChildServer> {
  const path = fileURLToPath(new URL(`./${entry}.js`, import.meta.url));
  const child: ChildProcess = spawn(process.execPath, [path], {
    env: { PATH: process.env.PATH ?? "", PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
      child.once("exit", () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill("SIGTERM");
    });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`${entry} did not start:\n${output}`));
    }, 15_000);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /\{"port":(\d+)\}/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ url: `http://127.0.0.1:${match[1]}`, pid: child.pid as number, stop });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} exited (${code}):\n${output}`));
    });
  });
}

const SERVICES = ["markers", "servers", "replays", "webhooks"] as const;

/**
 * The processes whose CPU time is read around each run: the gateway, the service under test, the
 * test database's Postgres backends (they name their database in their command line, which covers
 * the services' pools and the baseline's alike), the baseline, and the other services together. The
 * harness launches the system's processes as children of this one (`dist/start.js <name>`).
 */
export function systemCpuGroups(
  databaseUrl: string,
  service: (typeof SERVICES)[number],
  baselinePid: number,
): CpuGroup[] {
  const only = (name: string) => {
    const pids = findChildPids(process.pid, `start.js ${name}`);
    if (pids.length !== 1) throw new Error(`expected one "${name}" process under the harness, found ${pids.length}`);
    return pids;
  };
  const database = new URL(databaseUrl).pathname.slice(1);
  return [
    { label: "gateway", pids: only("gateway") },
    { label: service, pids: only(service) },
    { label: "postgres", cmdlineIncludes: ` ${database} ` },
    { label: "baseline", pids: [baselinePid] },
    { label: "other services", pids: SERVICES.filter((s) => s !== service).flatMap(only) },
  ];
}
