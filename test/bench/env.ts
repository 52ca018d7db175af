import { connect } from "node:net";
import pg from "pg";

/** A benchmark cannot run here (missing or unreachable dependency); run.ts prints it and exits 2. */
export class BenchEnvError extends Error {
  override name = "BenchEnvError";
}

export type BenchEnv = { databaseUrl: string; natsUrl: string; durationS: number; warmupS: number };

function positiveNumber(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new BenchEnvError(`${name} must be a positive number of seconds, got "${value}"`);
  return n;
}

/** The bench's settings; the only reader of process.env under test/bench. */
export function readBenchEnv(env: NodeJS.ProcessEnv = process.env): { durationS: number; warmupS: number } {
  const durationS = positiveNumber("BENCH_DURATION_S", env.BENCH_DURATION_S, 10);
  return {
    durationS,
    warmupS: positiveNumber("BENCH_WARMUP_S", env.BENCH_WARMUP_S, Math.min(3, Math.max(1, durationS / 5))),
  };
}

/**
 * Node flags for every process of the system under test: BENCH_CPU_PROF_DIR=dir writes a V8 CPU
 * profile of each there when it stops; BENCH_NODE_ARGS adds any others, space-separated
 * (`--trace-gc`, `--max-semi-space-size=32`, `--import ./gc-observer.mjs`).
 */
export function systemNodeArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  const profDir = env.BENCH_CPU_PROF_DIR;
  const extra = (env.BENCH_NODE_ARGS ?? "").split(/\s+/).filter(Boolean);
  return [...(profDir ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []), ...extra];
}

/** The environment a benchmark's child process starts from: PATH only, so no DATABASE_URL or NATS_URL leaks in. */
export function childEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return { PATH: env.PATH ?? "" };
}

/** DATABASE_URL and NATS_URL set and answering: Postgres runs `SELECT 1`, NATS accepts a TCP connection. */
export async function requirePostgresAndNats(env: NodeJS.ProcessEnv = process.env): Promise<BenchEnv> {
  const { DATABASE_URL: databaseUrl, NATS_URL: natsUrl } = env;
  const missing = [!databaseUrl && "DATABASE_URL", !natsUrl && "NATS_URL"].filter(Boolean);
  if (!databaseUrl || !natsUrl) {
    throw new BenchEnvError(
      `this benchmark runs the distributed system and needs real Postgres and NATS; set ${missing.join(" and ")}, e.g.\n` +
        "  DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres NATS_URL=nats://127.0.0.1:4222 npm run bench gateway",
    );
  }
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (err) {
    throw new BenchEnvError(`Postgres at DATABASE_URL does not answer: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => {});
  }
  await checkTcp(natsUrl);
  return { databaseUrl, natsUrl, ...readBenchEnv(env) };
}

function checkTcp(natsUrl: string): Promise<void> {
  let url: URL;
  try {
    url = new URL(natsUrl);
  } catch {
    return Promise.reject(new BenchEnvError(`NATS_URL is not a URL: "${natsUrl}"`));
  }
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port || 4222), timeout: 5000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve();
    });
    const fail = (why: string) => {
      socket.destroy();
      reject(new BenchEnvError(`NATS at NATS_URL does not answer: ${why}`));
    };
    socket.once("timeout", () => fail("timed out"));
    socket.once("error", (err) => fail(err.message));
  });
}
