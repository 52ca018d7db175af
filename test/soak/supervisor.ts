import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { join } from "node:path";

/**
 * Runs the system's processes as Kubernetes would: each by name, restarted when it dies. A death
 * the fault schedule caused (`kill`) is expected and the schedule restarts it; any other exit is
 * "died on its own": it is reported to `onDeath` and the process is restarted after a second, so
 * the run goes on and the checker counts it.
 */
export type Death = { name: string; code: number | null; signal: string | null; atMs: number; tail: string };

export type Supervisor = {
  add(name: string, args: string[], env: Record<string, string>): void;
  names(): string[];
  start(name: string): void;
  /** SIGKILL, then resolves once the process is gone; the caller restarts it. */
  kill(name: string): Promise<void>;
  running(name: string): boolean;
  /** The last lines a process printed (all its lives), for violations' examples. */
  tail(name: string, chars?: number): string;
  /** SIGTERM to every process at once; resolves to each one's exit code (null: killed after 15 s). */
  stopAll(): Promise<Record<string, number | null>>;
};

type Entry = {
  name: string;
  args: string[];
  env: Record<string, string>;
  child: ChildProcess | undefined;
  killing: boolean;
  ring: string[];
  log: WriteStream;
};

const RING_CHUNKS = 300;
const RESTART_AFTER_DEATH_MS = 1_000;

export function createSupervisor(deps: {
  entry: string;
  cwd: string;
  logDir: string;
  onDeath(death: Death): void;
}): Supervisor {
  const entries = new Map<string, Entry>();
  let stopping = false;

  const get = (name: string) => {
    const entry = entries.get(name);
    if (!entry) throw new Error(`no process ${name}`);
    return entry;
  };
  const alive = (child: ChildProcess | undefined) => !!child && child.exitCode === null && child.signalCode === null;
  const keep = (entry: Entry) => (chunk: Buffer) => {
    entry.ring.push(chunk.toString());
    if (entry.ring.length > RING_CHUNKS) entry.ring.shift();
    entry.log.write(chunk);
  };

  const start = (name: string) => {
    const entry = get(name);
    if (alive(entry.child)) throw new Error(`${name} is still running`);
    entry.killing = false;
    entry.log.write(`\n--- soak: start ${name} at ${new Date().toISOString()}\n`);
    const child = spawn(process.execPath, [deps.entry, ...entry.args], {
      cwd: deps.cwd,
      env: { PATH: process.env.PATH ?? "", ...entry.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    entry.child = child;
    child.stdout?.on("data", keep(entry));
    child.stderr?.on("data", keep(entry));
    child.once("exit", (code, signal) => {
      entry.log.write(`\n--- soak: ${name} exited code=${code} signal=${signal}\n`);
      if (entry.killing || stopping) return;
      deps.onDeath({ name, code, signal, atMs: Date.now(), tail: entry.ring.join("").slice(-4000) });
      setTimeout(() => {
        if (!stopping && !alive(entry.child)) start(name);
      }, RESTART_AFTER_DEATH_MS);
    });
  };

  return {
    add(name, args, env) {
      const log = createWriteStream(join(deps.logDir, `${name}.log`), { flags: "a" });
      entries.set(name, { name, args, env, child: undefined, killing: false, ring: [], log });
    },
    names: () => [...entries.keys()],
    start,
    async kill(name) {
      const entry = get(name);
      const child = entry.child;
      if (!child || !alive(child)) return;
      entry.killing = true;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
    running: (name) => alive(get(name).child),
    tail: (name, chars = 1500) => get(name).ring.join("").slice(-chars),
    async stopAll() {
      stopping = true;
      const codes = await Promise.all(
        [...entries.values()].map(
          (entry) =>
            new Promise<[string, number | null]>((resolve) => {
              const child = entry.child;
              if (!child || !alive(child)) return resolve([entry.name, child?.exitCode ?? null]);
              const hard = setTimeout(() => child.kill("SIGKILL"), 15_000);
              child.once("exit", (code) => {
                clearTimeout(hard);
                resolve([entry.name, code]);
              });
              child.kill("SIGTERM");
            }),
        ),
      );
      await Promise.all([...entries.values()].map((e) => new Promise((resolve) => e.log.end(resolve))));
      return Object.fromEntries(codes);
    },
  };
}
