import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createConnection } from "node:net";
import { delimiter, join } from "node:path";
import { waitFor } from "./poll.js";

/** The nats-server binary on PATH (or Debian's /usr/sbin), or undefined on a machine without one. */
export function natsServerBinary(): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/usr/local/bin"];
  return dirs
    .filter((dir) => dir !== "")
    .map((dir) => join(dir, "nats-server"))
    .find((path) => existsSync(path));
}

/**
 * A nats-server with JetStream of a test's own, on a loopback port and a store directory of its
 * own; restartable on both, so fault tests can crash it and bring it back. `extraArgs` make it a
 * node of a cluster (`-n`, `--cluster`, `--routes`).
 */
export function natsServer(binary: string, port: number, storeDir: string, extraArgs: readonly string[] = []) {
  let child: ChildProcess | undefined;
  const log: string[] = [];
  return {
    url: `nats://127.0.0.1:${port}`,
    async start() {
      const proc = spawn(binary, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir, ...extraArgs], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      proc.stderr?.on("data", (chunk: Buffer) => log.push(chunk.toString()));
      child = proc;
      await waitFor(`nats-server on port ${port}`, () => accepts(port), 10_000);
    },
    /** SIGKILL: no shutdown, no flush, as in a crashed node. */
    async kill() {
      const proc = child;
      child = undefined;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGKILL");
      await exited;
    },
    log: () => log.join("").slice(-4000),
  };
}

/** Whether something accepts a TCP connection on the loopback port. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
