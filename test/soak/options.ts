import { parseArgs } from "node:util";

/** The soak's command line: `--duration 90s|4m|10m` (the fault phase), `--seed N`, `--concurrency N`. */
export type SoakOptions = { durationMs: number; seed: number; concurrency: number; settleDeadlineMs: number };

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000 };

function duration(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (!match) throw new Error(`${flag} must look like 90s, 4m or 600000ms, got "${text}"`);
  return Math.round(Number(match[1]) * (units[match[2] ?? "s"] as number));
}

export function parseOptions(argv: string[]): SoakOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: "string", default: "90s" },
      seed: { type: "string" },
      concurrency: { type: "string", default: "10" },
      "settle-deadline": { type: "string", default: "180s" },
    },
  });
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a whole number, got "${values.seed}"`);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 100)
    throw new Error(`--concurrency must be 1 to 100, got "${values.concurrency}"`);
  const durationMs = duration(values.duration, "--duration");
  if (durationMs < 20_000) throw new Error("--duration must be at least 20s (a few faults need room)");
  return { durationMs, seed, concurrency, settleDeadlineMs: duration(values["settle-deadline"], "--settle-deadline") };
}
