import pg from "pg";
import type { Cluster, Kind } from "./cluster.js";
import { kinds } from "./cluster.js";
import type { Rng } from "./rng.js";

/**
 * The fault schedule, drawn from the seed before the run: a SIGKILL of one of the ten processes
 * every 15 to 30 s (the first a webhooks replica while deliveries are under way, the second a
 * replays replica while an upload is), restarted 1 to 3 s later; the private NATS crashed and
 * restarted (once, twice from 4 minutes); every connection to the soak's database terminated
 * once; and stalls of one kind's link to Postgres or NATS (added delay, a blackhole, a cut).
 */
export type Fault =
  | { kind: "process"; atMs: number; target: string; downMs: number }
  | { kind: "nats"; atMs: number; downMs: number }
  | { kind: "pgTerminate"; atMs: number }
  | {
      kind: "stall";
      atMs: number;
      target: Kind;
      link: "pg" | "nats";
      mode: "delay" | "blackhole" | "cut";
      forMs: number;
      delayMs: number;
    };

/** From a fault to its recovery; requests in it (plus a grace period) are left out of the latency. */
export type FaultWindow = { kind: Fault["kind"]; what: string; startMs: number; endMs: number };

export function planFaults(rng: Rng, durationMs: number, processNames: readonly string[]): Fault[] {
  const faults: Fault[] = [];
  const forced = [
    processNames.filter((n) => n.startsWith("webhooks-")),
    processNames.filter((n) => n.startsWith("replays-")),
  ];
  let i = 0;
  for (let at = rng.int(8_000, 15_000); at < durationMs - 5_000; at += rng.int(15_000, 30_000), i++) {
    const target = rng.pick(forced[i] ?? processNames);
    faults.push({ kind: "process", atMs: at, target, downMs: rng.int(1_000, 3_000) });
  }
  const natsFractions = durationMs >= 240_000 ? [0.3, 0.7] : [0.45];
  for (const f of natsFractions)
    faults.push({ kind: "nats", atMs: jitter(rng, durationMs, f), downMs: rng.int(1_000, 3_000) });
  faults.push({ kind: "pgTerminate", atMs: jitter(rng, durationMs, 0.62) });
  const modes = ["delay", "blackhole", "cut"] as const;
  const stalls = Math.max(3, Math.floor(durationMs / 30_000));
  for (let s = 0; s < stalls; s++) {
    faults.push({
      kind: "stall",
      atMs: jitter(rng, durationMs, (s + 0.5) / stalls),
      target: rng.pick(kinds),
      link: rng.chance(0.5) ? "pg" : "nats",
      mode: modes[s % modes.length] as (typeof modes)[number],
      forMs: rng.int(3_000, 5_000),
      delayMs: rng.int(800, 2_000),
    });
  }
  return faults.sort((a, b) => a.atMs - b.atMs);
}

function jitter(rng: Rng, durationMs: number, fraction: number): number {
  return Math.round(Math.min(durationMs - 3_000, Math.max(3_000, durationMs * fraction + rng.int(-4_000, 4_000))));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits (a few seconds at most) for `busy`, so a kill lands mid-delivery or mid-upload. */
async function whenBusy(busy: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!busy() && Date.now() < deadline) await sleep(20);
}

export type FaultRun = { done: Promise<void>; windows: FaultWindow[]; log: string[] };

export function runFaults(
  plan: Fault[],
  deps: {
    cluster: Cluster;
    /** When a kill of this kind lands where it hurts (webhooks: delivering; replays: uploading). */
    busy: Partial<Record<Kind, () => boolean>>;
    onFault(line: string): void;
  },
): FaultRun {
  const { cluster } = deps;
  const windows: FaultWindow[] = [];
  const log: string[] = [];
  const t0 = Date.now();
  const note = (line: string) => {
    const text = `+${((Date.now() - t0) / 1000).toFixed(1)}s ${line}`;
    log.push(text);
    deps.onFault(text);
  };
  const apply = async (fault: Fault) => {
    await sleep(fault.atMs - (Date.now() - t0));
    if (fault.kind === "process") {
      const busy = deps.busy[cluster.kindOf(fault.target)];
      if (busy) await whenBusy(busy);
      const startMs = Date.now();
      await cluster.supervisor.kill(fault.target);
      note(`SIGKILL ${fault.target}`);
      await sleep(fault.downMs);
      cluster.supervisor.start(fault.target);
      windows.push({ kind: "process", what: fault.target, startMs, endMs: Date.now() });
    } else if (fault.kind === "nats") {
      const startMs = Date.now();
      await cluster.nats.kill();
      note("SIGKILL nats-server");
      await sleep(fault.downMs);
      await cluster.nats.start();
      note("nats-server restarted");
      windows.push({ kind: "nats", what: "nats-server", startMs, endMs: Date.now() });
    } else if (fault.kind === "pgTerminate") {
      const startMs = Date.now();
      const n = await terminateBackends(cluster.databaseUrl, cluster.databaseName);
      note(`pg_terminate_backend: ${n} connections`);
      windows.push({ kind: "pgTerminate", what: `${n} backends`, startMs, endMs: Date.now() });
    } else {
      const link = cluster.links[fault.target][fault.link];
      const startMs = Date.now();
      if (fault.mode === "cut") {
        link.cut();
        note(`cut ${link.name}`);
      } else {
        if (fault.mode === "delay") link.delay(fault.delayMs);
        else link.blackhole();
        note(
          `${fault.mode} ${link.name}${fault.mode === "delay" ? ` +${fault.delayMs} ms` : ""} for ${fault.forMs} ms`,
        );
        await sleep(fault.forMs);
        link.heal();
      }
      windows.push({ kind: "stall", what: `${fault.mode} ${link.name}`, startMs, endMs: Date.now() });
    }
  };
  // Faults overlap as they come; each one's own recovery is awaited before it counts as ended.
  const done = Promise.all(plan.map(apply)).then(() => undefined);
  return { done, windows, log };
}

async function terminateBackends(databaseUrl: string, databaseName: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const res = await client.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
      [databaseName],
    );
    return res.rowCount ?? 0;
  } finally {
    await client.end();
  }
}
