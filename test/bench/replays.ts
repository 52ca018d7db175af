// `npm run bench replays`: signed GET /v1/replays on a tenant holding 1 000 000 replays (seeded with
// one INSERT ... SELECT generate_series, not one RPC each), at 16 connections: the first page, and a
// page 500 000 rows deep reached by its page_token (keyset), against the same depth read with
// OFFSET straight from Postgres (the baseline a naive implementation would cost), in the same run.
// Prints the keyset query's EXPLAIN ANALYZE. Last line: {"bench":"replays","ratio":{"16":deep/first},...}.
import { randomUUID } from "node:crypto";
import pg from "pg";
import { provisionTenant, sendSigned } from "../http.js";
import { startDistributedSystem } from "../system.js";
import { readBenchEnv, requirePostgresAndNats, systemNodeArgs } from "./env.js";
import { formatTable, round, writeResults } from "./report.js";
import { createSampleBuffer, summarizeLatencies } from "./stats.js";

export const description =
  "signed GET /v1/replays over 1 000 000 replays at 16 connections: first page vs a page 500 000 deep (keyset), OFFSET as baseline";

const ROWS = 1_000_000;
const DEPTH = 500_000;
const CONNECTIONS = 16;
const PAGE_SIZE = 20;
const WALK_PAGE = 100;
const TARGET = 1.2;

const progress = (line: string) => process.stderr.write(`[bench replays] ${line}\n`);

type Measured = { rps: number; p50Ms: number; p99Ms: number };

/** `CONNECTIONS` loops calling `once` for `seconds`; latency of each call and calls per second. */
async function measure(seconds: number, once: () => Promise<void>): Promise<Measured> {
  const samples = createSampleBuffer();
  const until = performance.now() + seconds * 1000;
  let count = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const started = performance.now();
        await once();
        samples.push(performance.now() - started);
        count++;
      }
    }),
  );
  const summary = summarizeLatencies(samples.values());
  return {
    rps: Math.round(count / seconds),
    p50Ms: round(summary.p50Ms, 3) ?? 0,
    p99Ms: round(summary.p99Ms, 3) ?? 0,
  };
}

export async function run(): Promise<void> {
  await requirePostgresAndNats();
  const { durationS, warmupS } = readBenchEnv();
  const startedAt = new Date();
  const sys = await startDistributedSystem({ env: { LOG_LEVEL: "warn" }, nodeArgs: systemNodeArgs() });
  const db = new pg.Pool({ connectionString: sys.databaseUrl, max: CONNECTIONS });
  try {
    // The plan's rate limit would refuse the load: the tenant gets an unthrottled one.
    const t = await provisionTenant(sys, { rateLimitRps: 1_000_000, rateLimitBurst: 1_000_000 });
    const seedStarted = performance.now();
    await db.query(
      `INSERT INTO replays.replay (replay_id, tenant_id, server_id, integration, quality, status, pipeline,
                                   started_at, ended_at, duration_ms, size_bytes, format_version, retention_until,
                                   hot_until)
       SELECT gen_random_uuid(), $1, $2, 'bench', 'standard', 'ready', 'ended',
              $3::timestamptz - make_interval(secs => i), $3::timestamptz - make_interval(secs => i) + interval '10 minutes',
              600000, 1000, 1, $3::timestamptz + interval '90 days',
              $3::timestamptz - make_interval(secs => i) + interval '30 days'
         FROM generate_series(1, $4) AS i`,
      [t.tenantId, randomUUID(), startedAt.toISOString(), ROWS],
    );
    await db.query("ANALYZE replays.replay");
    const seedMs = performance.now() - seedStarted;
    progress(`seeded ${ROWS} replays in ${Math.round(seedMs)} ms`);

    const get = async (query: string) => {
      const res = await sendSigned(sys.baseUrl, t.signer, "GET", `/v1/replays${query}`);
      if (res.status !== 200) throw new Error(`GET /v1/replays${query}: ${res.status} ${res.text}`);
      return res.body as { results: { id: string; started_at: string }[]; next_page_token: string };
    };
    // The token 500 000 rows deep, as a client reaches it: page after page.
    const walkStarted = performance.now();
    let token = "";
    for (let seen = 0; seen < DEPTH; seen += WALK_PAGE) {
      token = (await get(`?page_size=${WALK_PAGE}${token ? `&page_token=${token}` : ""}`)).next_page_token;
    }
    progress(`walked to ${DEPTH} deep in ${Math.round(performance.now() - walkStarted)} ms`);
    const deepFirst = (await get(`?page_size=${PAGE_SIZE}&page_token=${token}`)).results[0];
    const offsetRow = await db.query<{ replay_id: string }>(
      `SELECT replay_id FROM replays.replay WHERE tenant_id = $1
        ORDER BY started_at DESC, replay_id DESC OFFSET $2 LIMIT 1`,
      [t.tenantId, DEPTH],
    );
    if (deepFirst?.id !== offsetRow.rows[0]?.replay_id) {
      throw new Error(
        `the keyset page and OFFSET disagree at ${DEPTH}: ${deepFirst?.id} vs ${offsetRow.rows[0]?.replay_id}`,
      );
    }

    const targets: [string, () => Promise<void>][] = [
      ["first page (API)", async () => void (await get(`?page_size=${PAGE_SIZE}`))],
      ["500 000 deep, page_token (API)", async () => void (await get(`?page_size=${PAGE_SIZE}&page_token=${token}`))],
      [
        "500 000 deep, OFFSET (SQL only)",
        async () =>
          void (await db.query(
            `SELECT * FROM replays.replay WHERE tenant_id = $1
              ORDER BY started_at DESC, replay_id DESC OFFSET $2 LIMIT $3`,
            [t.tenantId, DEPTH, PAGE_SIZE + 1],
          )),
      ],
    ];
    const results: Record<string, Measured> = {};
    for (const [name, once] of targets) {
      await measure(warmupS, once);
      results[name] = await measure(durationS, once);
      progress(`${name}: ${Math.round(results[name].rps)} req/s`);
    }
    const [first, deep, offset] = targets.map(([name]) => results[name] as Measured) as [Measured, Measured, Measured];
    const deepOverFirst = deep.p50Ms / first.p50Ms;
    const offsetOverDeep = offset.p50Ms / deep.p50Ms;

    const position = await db.query<{ started_at: Date; replay_id: string }>(
      `SELECT started_at, replay_id FROM replays.replay WHERE replay_id = $1`,
      [deepFirst.id],
    );
    const plan = await db.query<{ "QUERY PLAN": string }>(
      `EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM replays.replay
        WHERE tenant_id = $1 AND (started_at, replay_id) < ($2, $3)
        ORDER BY started_at DESC, replay_id DESC LIMIT $4`,
      [t.tenantId, position.rows[0]?.started_at, position.rows[0]?.replay_id, PAGE_SIZE + 1],
    );
    const planText = plan.rows.map((r) => r["QUERY PLAN"]).join("\n");
    const summary = {
      bench: "replays",
      ratio: { [String(CONNECTIONS)]: round(deepOverFirst, 2) },
      target: { deepOverFirst: TARGET, met: deepOverFirst <= TARGET },
      offsetOverKeysetDeep: round(offsetOverDeep, 2),
      seedMs: Math.round(seedMs),
      rows: ROWS,
      depth: DEPTH,
      results,
    };
    const path = await writeResults("replays", { ...summary, startedAt, plan: planText }, startedAt);
    process.stdout.write(
      [
        `replays benchmark: ${ROWS} replays in one tenant (seeded in ${Math.round(seedMs)} ms), signed GET /v1/replays, ${CONNECTIONS} connections, ${durationS} s per run`,
        "",
        formatTable(
          ["target", "req/s", "p50 ms", "p99 ms"],
          targets.map(([name]) => {
            const r = results[name] as Measured;
            return [name, Math.round(r.rps), round(r.p50Ms, 3), round(r.p99Ms, 3)];
          }),
        ),
        "",
        `deep keyset page / first page (p50): ${round(deepOverFirst, 2)} (target <= ${TARGET}: ${deepOverFirst <= TARGET ? "met" : "NOT met"})`,
        `OFFSET (SQL alone) / deep keyset page through the API (p50): ${round(offsetOverDeep, 2)}`,
        "",
        "keyset query plan (EXPLAIN ANALYZE, 500 000 deep):",
        planText,
        "",
        `results: ${path}`,
        JSON.stringify(summary),
        "",
      ].join("\n"),
    );
  } finally {
    await db.end();
    await sys.stop();
  }
}
