// Clients that never read: N connections each pipeline three GET /docs/js/scalar.js
// (3.5 MB) and read nothing. Starts the embedded system from dist/, then reports its resident memory
// before, at the peak and after, the slowest /healthz while it lasts, and how many of the attack's
// connections the gateway still holds as time passes. docs/public-port.md has the figures.
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePorts, freeServicePorts } from "../free-port.js";

export const description =
  "RSS and /healthz while N clients pipeline the docs script and never read [clients=100] [seconds=75]";

function rssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Math.round(Number(match?.[1] ?? 0) / 1024);
}

/** Established connections to `port` as the kernel lists them (the server's side). */
function establishedTo(port: number): number {
  const out = execFileSync("ss", ["-tnH", "state", "established", `( sport = :${port} )`], { encoding: "utf8" });
  return out.split("\n").filter((line) => line.trim() !== "").length;
}

async function timed(url: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  await res.arrayBuffer();
  return performance.now() - started;
}

export async function run(args: string[]): Promise<void> {
  const clients = Number(args[0] ?? 100);
  const seconds = Number(args[1] ?? 75);
  const root = fileURLToPath(new URL("../../..", import.meta.url));
  const dataDir = await mkdtemp(join(tmpdir(), "replay-unread-"));
  const [port, internalPort] = (await freePorts(2)) as [number, number];
  const services = await freeServicePorts();
  const child = spawn(process.execPath, [join(root, "dist", "start.js")], {
    env: {
      ...process.env,
      DATABASE_URL: "",
      NATS_URL: "",
      DATA_DIR: dataDir,
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      ...services.env,
      LOG_LEVEL: "warn",
    },
    stdio: "ignore",
  });
  const base = `http://127.0.0.1:${port}`;
  const sockets: Socket[] = [];
  try {
    for (const until = Date.now() + 120_000; ; ) {
      if (
        (await fetch(`${base}/readyz`).then(
          (r) => r.status,
          () => 0,
        )) === 200
      )
        break;
      if (Date.now() > until) throw new Error("the system did not become ready");
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    // One read first, so that the script is loaded (and compressed) before the baseline.
    await timed(`${base}/docs/js/scalar.js`);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const before = rssMb(child.pid as number);
    const healthBefore = await timed(`${base}/healthz`);
    const request = "GET /docs/js/scalar.js HTTP/1.1\r\nHost: x\r\n\r\n".repeat(3);
    for (let i = 0; i < clients; i++) {
      const socket = connect({ host: "127.0.0.1", port });
      socket.on("error", () => {});
      socket.pause();
      socket.once("connect", () => socket.write(request));
      sockets.push(socket);
    }
    const started = Date.now();
    let peak = before;
    let slowest = 0;
    const held: string[] = [];
    while (Date.now() - started < seconds * 1000) {
      peak = Math.max(peak, rssMb(child.pid as number));
      slowest = Math.max(slowest, await timed(`${base}/healthz`));
      const second = Math.round((Date.now() - started) / 1000);
      if (second % 5 === 0 && held.length <= second / 5) held.push(`${second}s:${establishedTo(port)}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const after = rssMb(child.pid as number);
    // The ratio is the peak resident memory over the baseline measured before the attack, in this
    // run: 1.0 is no growth (it was 3.3 before the public port's limits).
    const ratio = Math.round((peak / before) * 100) / 100;
    process.stdout.write(
      `${JSON.stringify({ bench: "unread-clients", ratio: { [clients]: ratio }, seconds, rssMb: { before, peak, after }, healthzMs: { before: Math.round(healthBefore), slowestDuring: Math.round(slowest) }, connectionsHeld: held.join(" ") })}\n`,
    );
  } finally {
    for (const socket of sockets) socket.destroy();
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
    await rm(dataDir, { recursive: true, force: true });
  }
}
