import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import { freePorts } from "./free-port.js";
import { waitFor } from "./poll.js";

// A real Prometheus (Debian's package) as a child process of a test: its own port, its own config
// and TSDB under the test's directory, and the few HTTP API calls a test asks it.

export const PROMETHEUS = "/usr/bin/prometheus";
/** Its rules checker, from the same Debian package. */
export const PROMTOOL = "/usr/bin/promtool";

export type Alert = {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: "pending" | "firing";
  activeAt: string;
  value: string;
};
export type Sample = { metric: Record<string, string>; value: [number, string] };
export type Target = { labels: Record<string, string>; health: "up" | "down" | "unknown"; lastError: string };

export type Prometheus = {
  url: string;
  /** The alerts pending or firing now (GET /api/v1/alerts). */
  alerts(): Promise<Alert[]>;
  /** An instant query's series (GET /api/v1/query). */
  query(expr: string): Promise<Sample[]>;
  /** The scrape targets and their health (GET /api/v1/targets). */
  targets(): Promise<Target[]>;
  /** What Prometheus logged, for failure messages. */
  log(): string;
  stop(): Promise<void>;
};

/**
 * Starts Prometheus on a free loopback port with its config and TSDB in `dir`: each job of `jobs`
 * scraped at its targets (host:port, GET /metrics with `token` as the bearer token, as the
 * ServiceMonitor sends it), every `intervalS`, with `ruleFiles` evaluated as often. Resolves once
 * it answers /-/ready.
 */
export async function startPrometheus(options: {
  dir: string;
  jobs: Record<string, string[]>;
  ruleFiles: string[];
  token?: string;
  intervalS: number;
}): Promise<Prometheus> {
  const [port] = (await freePorts(1)) as [number];
  const interval = `${options.intervalS}s`;
  const config = {
    global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
    rule_files: options.ruleFiles,
    scrape_configs: Object.entries(options.jobs).map(([job, targets]) => ({
      job_name: job,
      metrics_path: "/metrics",
      ...(options.token ? { authorization: { type: "Bearer", credentials: options.token } } : {}),
      static_configs: [{ targets }],
    })),
  };
  const configFile = join(options.dir, "prometheus.yml");
  await writeFile(configFile, stringify(config));
  const output: string[] = [];
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(options.dir, "tsdb")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const url = `http://127.0.0.1:${port}`;

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(url + path, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`${path}: ${body.error ?? res.status}`);
    return body.data;
  };
  const prometheus: Prometheus = {
    url,
    alerts: async () => (await api<{ alerts: Alert[] }>("/api/v1/alerts")).alerts,
    query: async (expr) => (await api<{ result: Sample[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`)).result,
    targets: async () => (await api<{ activeTargets: Target[] }>("/api/v1/targets")).activeTargets,
    log: () => output.join(""),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
  try {
    await waitFor(
      "prometheus ready",
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}):\n${prometheus.log()}`);
        return fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2000) }).then(
          (res) => res.ok,
          () => false,
        );
      },
      60_000,
    );
  } catch (err) {
    await prometheus.stop();
    throw err;
  }
  return prometheus;
}

/** Whether this machine has Prometheus to run. */
export const hasPrometheus = () => existsSync(PROMETHEUS);
