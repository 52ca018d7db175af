// `npm run bench <name>`: one module per benchmark, each exporting `description` and `run(args)`.
// Benchmarks measure against a baseline in the same run and report ratios; timed assertions do
// not belong in tests (the machine is shared and noisy).
import { BenchEnvError } from "./env.js";

type Benchmark = { description: string; run(args: string[]): Promise<void> };

const benchmarks: Record<string, () => Promise<Benchmark>> = {
  gateway: () => import("./gateway.js"),
  servers: () => import("./servers.js"),
  embedded: () => import("./embedded.js"),
  replays: () => import("./replays.js"),
  markers: () => import("./markers.js"),
  webhooks: () => import("./webhooks.js"),
  "unread-clients": () => import("./unread-clients.js"),
  scale: () => import("./scale.js"),
  latency: () => import("./latency.js"),
};

async function usage(): Promise<string> {
  const lines = await Promise.all(
    Object.entries(benchmarks).map(async ([name, load]) => `  ${name.padEnd(10)} ${(await load()).description}`),
  );
  return ["usage: npm run bench <name> [args]", "benchmarks:", ...lines].join("\n");
}

async function main(): Promise<number> {
  const [name, ...args] = process.argv.slice(2);
  const load = name === undefined ? undefined : benchmarks[name];
  if (!load) {
    if (name !== undefined) process.stderr.write(`unknown benchmark "${name}"\n`);
    process.stderr.write(`${await usage()}\n`);
    return 2;
  }
  try {
    await (await load()).run(args);
    return 0;
  } catch (err) {
    if (err instanceof BenchEnvError) {
      process.stderr.write(`bench ${name}: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
