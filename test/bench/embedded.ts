// `npm run bench embedded`: the embedded start as `npm start` runs it (`node dist/start.js`, no
// DATABASE_URL), on a fresh DATA_DIR against a restart on the DATA_DIR the fresh start just made.
// A fresh DATA_DIR starts from the initdb template (lib/db/embedded-template.ts); a third start with
// EMBEDDED_TEMPLATE_DIR=off shows what initdb in the process costs. Measured per start: spawn ->
// /readyz 200 and the process's CPU time by then (the steadier measure on a shared machine, where
// wall time follows the load), and its peak resident memory (VmHWM) once it logged "ready". Runs are
// interleaved (fresh, restart, initdb; three rounds) and reported as medians.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { defaultTemplateDir, ensureTemplate } from "../../lib/db/embedded-template.js";
import { freePorts, freeServicePorts } from "../free-port.js";
import { childEnv } from "./env.js";
import { processCpuMs, processPeakRssMb } from "./proc.js";
import { formatTable, repoRoot, round, writeResults } from "./report.js";
import { median } from "./stats.js";

export const description =
  "npm start on a fresh DATA_DIR (initdb template) vs a restart vs initdb: time to /readyz, peak RSS";

const ROUNDS = 3;
const READY_TIMEOUT_MS = 60_000;
const POLL_MS = 10;
const RATIO_TARGET = 1.3;

const VARIANTS = ["fresh", "restart", "initdb"] as const;
type Variant = (typeof VARIANTS)[number];
type Start = {
  variant: Variant;
  round: number;
  readyMs: number;
  peakMb: number | undefined;
  cpuMs: number | undefined;
  created: string;
};

const progress = (line: string) => process.stderr.write(`[bench embedded] ${line}\n`);

export async function run(_args: string[]): Promise<void> {
  const startedAt = new Date();
  const template = defaultTemplateDir();
  // What `npm ci` / `npm run build` leave behind; built here if this checkout has none yet.
  const built = await ensureTemplate(template);
  progress(`template: ${built.dir} (${built.created ? "built now" : "present"})`);
  const root = await mkdtemp(join(tmpdir(), "bench-embedded-"));
  const starts: Start[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const dataDir = join(root, `data-${round}`);
      for (const variant of VARIANTS) {
        const start = await measureStart(
          variant === "initdb" ? join(root, `initdb-${round}`) : dataDir,
          variant === "initdb" ? { EMBEDDED_TEMPLATE_DIR: "off" } : {},
        );
        starts.push({ variant, round, ...start });
        progress(
          `round ${round} ${variant.padEnd(7)} ${Math.round(start.readyMs)} ms to /readyz, CPU ${round1(start.cpuMs)} ms, peak ${round1(start.peakMb)} MiB (${start.created})`,
        );
      }
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }

  const medianOf = (variant: Variant, pick: (s: Start) => number | undefined) => {
    const values = starts
      .filter((s) => s.variant === variant)
      .map(pick)
      .filter((v): v is number => v !== undefined);
    return values.length ? median(values) : Number.NaN;
  };
  const summary = Object.fromEntries(
    VARIANTS.map((variant) => [
      variant,
      {
        readyMs: medianOf(variant, (s) => s.readyMs),
        cpuMs: medianOf(variant, (s) => s.cpuMs),
        peakMb: medianOf(variant, (s) => s.peakMb),
      },
    ]),
  ) as Record<Variant, { readyMs: number; cpuMs: number; peakMb: number }>;
  const ratio = summary.fresh.readyMs / summary.restart.readyMs;
  const rows = VARIANTS.map((variant) => {
    const own = starts.filter((s) => s.variant === variant);
    return [
      variant,
      round(summary[variant].readyMs),
      own.map((s) => Math.round(s.readyMs)).join(", "),
      round(summary[variant].cpuMs),
      own.map((s) => round1(s.cpuMs)).join(", "),
      round(summary[variant].peakMb),
      own.map((s) => round1(s.peakMb)).join(", "),
      [...new Set(own.map((s) => s.created))].join(", "),
    ];
  });
  const results = {
    benchmark: "embedded",
    startedAt: startedAt.toISOString(),
    node: process.version,
    cpus: cpus().length,
    template: built.dir,
    rounds: ROUNDS,
    ratioTarget: RATIO_TARGET,
    summary,
    starts,
  };
  const path = await writeResults("embedded", results, startedAt);
  const last = {
    bench: "embedded",
    ratio: { 1: round(ratio) },
    freshMs: round(summary.fresh.readyMs),
    restartMs: round(summary.restart.readyMs),
    initdbMs: round(summary.initdb.readyMs),
    freshCpuMs: round(summary.fresh.cpuMs),
    restartCpuMs: round(summary.restart.cpuMs),
    initdbCpuMs: round(summary.initdb.cpuMs),
    freshPeakMiB: round(summary.fresh.peakMb),
    restartPeakMiB: round(summary.restart.peakMb),
    initdbPeakMiB: round(summary.initdb.peakMb),
    ratioTarget: RATIO_TARGET,
    rounds: ROUNDS,
  };
  process.stdout.write(
    [
      `embedded start: node dist/start.js without DATABASE_URL, ${ROUNDS} interleaved rounds, medians; ` +
        `machine: ${cpus().length} cores, shared; node ${process.version}`,
      "fresh: a new DATA_DIR (from the initdb template); restart: the same DATA_DIR again; initdb: a new DATA_DIR with EMBEDDED_TEMPLATE_DIR=off",
      "",
      formatTable(
        ["start", "ms to /readyz", "runs", "CPU ms to /readyz", "runs", "peak RSS MiB", "runs", "database"],
        rows,
      ),
      "",
      `fresh / restart: ${round(ratio)} (target <= ${RATIO_TARGET}); initdb / restart: ${round(summary.initdb.readyMs / summary.restart.readyMs)}`,
      `results: ${path}`,
      JSON.stringify(last),
      "",
    ].join("\n"),
  );
}

const round1 = (value: number | undefined) => (value === undefined ? "-" : Math.round(value));

/** One start: spawn -> /readyz 200, then VmHWM once the "ready" line is out; then SIGTERM. */
async function measureStart(
  dataDir: string,
  env: Record<string, string>,
): Promise<{ readyMs: number; peakMb: number | undefined; cpuMs: number | undefined; created: string }> {
  const [port, internalPort] = (await freePorts(2)) as [number, number];
  const output: string[] = [];
  const began = performance.now();
  const child = spawn(process.execPath, [join(repoRoot, "dist", "start.js")], {
    cwd: repoRoot,
    env: {
      ...childEnv(),
      LOG_LEVEL: "info",
      PORT: String(port),
      INTERNAL_PORT: String(internalPort),
      ...(await freeServicePorts()).env,
      DATA_DIR: dataDir,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
  try {
    const readyMs = (await waitFor(child, output, READY_TIMEOUT_MS, async () => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      await res?.arrayBuffer();
      return res?.status === 200 ? performance.now() - began : undefined;
    })) as number;
    // CPU time up to /readyz: the same work in every variant (a first start's dev tenant comes after).
    const cpuMs = processCpuMs(child.pid as number);
    // The peak is read once the start is complete (a first start's dev tenant included).
    await waitFor(child, output, READY_TIMEOUT_MS, async () =>
      /"msg":"ready"/.test(output.join("")) ? true : undefined,
    );
    const text = output.join("");
    const created = /"msg":"embedded database created from the template"/.test(text)
      ? "template"
      : /"msg":"embedded database created by initdb"/.test(text)
        ? "initdb"
        : "existing";
    return { readyMs, peakMb: processPeakRssMb(child.pid as number), cpuMs, created };
  } finally {
    await stop(child);
  }
}

async function waitFor<T>(
  child: ChildProcess,
  output: string[],
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`start.js exited (${child.exitCode}):\n${output.join("")}`);
    const found = await probe();
    if (found !== undefined) return found;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Error(`start.js not ready after ${timeoutMs} ms:\n${output.join("")}`);
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.once("exit", () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill("SIGTERM");
  });
}
