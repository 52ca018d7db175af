// The scale benchmark's dataset, seeded by SQL into the services' own tables (INSERT ... SELECT
// over generate_series, a batch a statement, foreign-key triggers off for the session): at scale 1,
// 10 000 tenants (identity, and the replays service's plan projection), 100 000 subscriptions (ten
// a tenant), 5 000 000 ended deliveries with 10 000 000 attempts spread over the 30 days before the
// seed (one day a thirtieth of them, so a retention pass has a day's worth to drop), 1 000 000
// ready replays with their markers projection, and 5 000 000 markers (five a replay). Tenant 1 is
// the heavy one: its first subscription holds a fifth of the deliveries (its delivery log is the big
// one) and it holds a fifth of the replays. Every id is derived from its row number
// (bench_scale.uuid4), so a slice of rows can be written again exactly (the retention pass's day).
// The seeded database is kept between runs: bench_scale.seed records what it holds (scale, seed
// version, the migrations it was seeded under, when), and a run whose scale and seed version match
// reuses it; the system applies any newer migration to it when it starts, as in production.
import pg from "pg";

/** Bump when the seeding SQL changes what a seeded database holds: the next run seeds anew. */
export const SEED_VERSION = 3;
export const SEED_DATABASE = "replay_bench_scale";
/** How far back the deliveries go; the oldest of these days is the retention pass's. */
export const DELIVERY_DAYS = 30;
const DELIVERY_BATCH = 100_000;
const REPLAY_BATCH = 100_000;

export type SeedSize = {
  tenants: number;
  subscriptions: number;
  deliveries: number;
  attempts: number;
  replays: number;
  markers: number;
};

/** The dataset at `scale` (1: the platform size; 0.01 to develop). */
export function seedSize(scale: number): SeedSize {
  const tenants = Math.max(10, Math.round(10_000 * scale));
  // An even count: every other delivery has one attempt, the others three (two a delivery on average).
  const deliveries = 2 * Math.max(300, Math.round(2_500_000 * scale));
  const replays = Math.max(100, Math.round(1_000_000 * scale));
  return {
    tenants,
    subscriptions: 10 * tenants,
    deliveries,
    attempts: 2 * deliveries,
    replays,
    markers: 5 * replays,
  };
}

export type SeedRecord = {
  scale: number;
  seedVersion: number;
  migrations: string[];
  seededAt: Date;
  seedMs: number;
  /** A retention pass deleted the oldest day and the run stopped before writing it again. */
  retentionPending: boolean;
};

/** DATABASE_URL's server with `name` as the database. */
export function databaseUrlOf(baseUrl: string, name: string): string {
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates the kept database when it is missing (`fresh`: dropped first); resolves to its URL. */
export async function ensureDatabase(baseUrl: string, fresh: boolean): Promise<string> {
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    if (fresh) await admin.query(`DROP DATABASE IF EXISTS ${SEED_DATABASE} WITH (FORCE)`);
    const { rowCount } = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [SEED_DATABASE]);
    if (rowCount === 0) await admin.query(`CREATE DATABASE ${SEED_DATABASE}`);
  } finally {
    await admin.end();
  }
  return databaseUrlOf(baseUrl, SEED_DATABASE);
}

/** What the kept database holds, or undefined when it was never seeded (or does not exist). */
export async function readSeedRecord(baseUrl: string): Promise<SeedRecord | undefined> {
  const client = new pg.Client({ connectionString: databaseUrlOf(baseUrl, SEED_DATABASE) });
  try {
    await client.connect();
  } catch {
    return undefined;
  }
  try {
    const { rows } = await client.query(
      `SELECT scale, seed_version, migrations, seeded_at, seed_ms, retention_pending FROM bench_scale.seed`,
    );
    const row = rows[0];
    if (!row) return undefined;
    return {
      scale: Number(row.scale),
      seedVersion: row.seed_version,
      migrations: row.migrations,
      seededAt: row.seeded_at,
      seedMs: row.seed_ms,
      retentionPending: row.retention_pending,
    };
  } catch {
    return undefined;
  } finally {
    await client.end();
  }
}

/** Every migration applied to the database's schemas, as `<schema>/<id>`. */
export async function appliedMigrations(client: pg.Client): Promise<string[]> {
  const { rows: tables } = await client.query<{ schema: string }>(
    `SELECT table_schema AS schema FROM information_schema.tables
      WHERE table_name = 'schema_migrations' ORDER BY table_schema`,
  );
  const ids: string[] = [];
  for (const { schema } of tables) {
    const { rows } = await client.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations ORDER BY id`);
    ids.push(...rows.map((r) => `${schema}/${r.id}`));
  }
  return ids;
}

/** The bench's own schema: the deterministic ids, and (in the kept database) the seed record. */
export async function createBenchSchema(client: pg.Client): Promise<void> {
  await client.query(`
    CREATE SCHEMA IF NOT EXISTS bench_scale;
    -- A version 4 UUID derived from (kind, n): the same row gets the same id whenever it is written.
    CREATE OR REPLACE FUNCTION bench_scale.uuid4(kind text, n bigint) RETURNS uuid
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      -- One expression with no FROM, so that the planner inlines it (a call each costs ~40 µs).
      AS $$ SELECT overlay(overlay(md5(kind || n::text) PLACING '4' FROM 13) PLACING '8' FROM 17)::uuid $$;
    -- A version 7 UUID with the time \`at\` and the rest derived from (kind, n), as the fan-out
    -- makes delivery ids (webhooks.uuid7, in time order): the same row gets the same id again.
    CREATE OR REPLACE FUNCTION bench_scale.uuid7(kind text, n bigint, at timestamptz) RETURNS uuid
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $$ SELECT overlay(overlay(overlay(md5(kind || n::text)
                     PLACING lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') FROM 1)
                     PLACING '7' FROM 13) PLACING '8' FROM 17)::uuid $$;
    CREATE TABLE IF NOT EXISTS bench_scale.seed (
      scale numeric NOT NULL,
      seed_version integer NOT NULL,
      migrations text[] NOT NULL,
      seeded_at timestamptz NOT NULL,
      seed_ms integer NOT NULL,
      retention_pending boolean NOT NULL DEFAULT false
    );`);
}

/** A session for bulk writes: no foreign-key triggers (every reference is written by the seed), no WAL flush per commit. */
export async function bulkSession(client: pg.Client): Promise<void> {
  await client.query("SET session_replication_role = replica");
  await client.query("SET synchronous_commit = off");
  await client.query("SET maintenance_work_mem = '512MB'");
  await client.query("SET jit = off");
}

/** Seeds the whole dataset at `size`, `at` being the seed's "now"; the tables must be empty. */
export async function seedAll(
  client: pg.Client,
  size: SeedSize,
  at: Date,
  progress: (line: string) => void,
): Promise<void> {
  await bulkSession(client);
  let started = performance.now();
  await seedTenants(client, size, at);
  await seedSubscriptions(client, size, at);
  progress(`  ${size.tenants} tenants, ${size.subscriptions} subscriptions in ${seconds(started)} s`);
  started = performance.now();
  await createLogDays(client, at);
  const rebuilt = await withoutIndexes(client, BULK_TABLES, async () => {
    progress(`  the indexes and keys of ${BULK_TABLES.join(", ")} dropped for the load (${seconds(started)} s)`);
    started = performance.now();
    for (let lo = 1; lo <= size.deliveries; lo += DELIVERY_BATCH) {
      await seedDeliveries(client, size, at, lo, Math.min(size.deliveries, lo + DELIVERY_BATCH - 1));
      const done = Math.min(size.deliveries, lo - 1 + DELIVERY_BATCH);
      if (done % (10 * DELIVERY_BATCH) === 0)
        progress(`  deliveries ${done} of ${size.deliveries} (${seconds(started)} s)`);
    }
    progress(`  ${size.deliveries} deliveries, ${size.attempts} attempts in ${seconds(started)} s`);
    started = performance.now();
    for (let lo = 1; lo <= size.replays; lo += REPLAY_BATCH) {
      await seedReplays(client, size, at, lo, Math.min(size.replays, lo + REPLAY_BATCH - 1));
    }
    progress(`  ${size.replays} replays, ${size.markers} markers in ${seconds(started)} s`);
    started = performance.now();
  });
  progress(`  ${rebuilt} indexes and keys built again, as the migrations define them, in ${seconds(started)} s`);
  started = performance.now();
  await vacuumAnalyze(client, [
    "identity.tenant",
    "replays.tenant",
    "webhooks.subscription",
    "webhooks.delivery",
    "webhooks.attempt",
    "replays.replay",
    "markers.replay",
    "markers.marker",
  ]);
  await client.query("CHECKPOINT");
  progress(`  VACUUM ANALYZE and CHECKPOINT in ${seconds(started)} s`);
}

/** The partitions of the delivery log (migration 016) for each UTC day of the deliveries seeded at `at`. */
export async function createLogDays(client: pg.Client, at: Date): Promise<void> {
  await client.query(
    `SELECT webhooks.create_log_day(d::date)
       FROM generate_series((($1::timestamptz - make_interval(days => $2::int)) AT TIME ZONE 'UTC')::date,
                            ($1::timestamptz AT TIME ZONE 'UTC')::date, interval '1 day') d`,
    [at, DELIVERY_DAYS],
  );
}

/**
 * The big tables, loaded without their indexes and keys (built again after: a sort each, not 5M inserts); the
 * delivery log's ended partitions carry an index of their own (migration 016).
 */
const BULK_TABLES = [
  "webhooks.delivery",
  "webhooks.delivery_ended",
  "webhooks.attempt",
  "replays.replay",
  "markers.replay",
  "markers.marker",
];

/**
 * Runs `load` with the indexes, primary keys, unique constraints and foreign keys of `tables` (and
 * the foreign keys referencing them) dropped, then creates them again from their definitions as
 * the catalog held them (pg_get_indexdef, pg_get_constraintdef), under the same names, the foreign
 * keys validated: the schema is the migrations' again. A partition's index or key that comes from its parent's goes
 * and comes back with it. Resolves to how many were built.
 */
export async function withoutIndexes(client: pg.Client, tables: readonly string[], load: () => Promise<void>) {
  const { rows: constraints } = await client.query<{ name: string; tbl: string; type: string; def: string }>(
    `SELECT conname AS name, conrelid::regclass::text AS tbl, contype AS type, pg_get_constraintdef(oid) AS def
       FROM pg_constraint
      WHERE ((conrelid = ANY ($1::regclass[]) AND contype IN ('p', 'u', 'f'))
         OR (confrelid = ANY ($1::regclass[]) AND contype = 'f'))
        AND conparentid = 0`,
    [tables],
  );
  const { rows: indexes } = await client.query<{ name: string; def: string }>(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
       FROM pg_index i
      WHERE i.indrelid = ANY ($1::regclass[])
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u', 'x'))
        AND NOT EXISTS (SELECT 1 FROM pg_inherits p WHERE p.inhrelid = i.indexrelid)`,
    [tables],
  );
  const foreign = constraints.filter((c) => c.type === "f");
  const keys = constraints.filter((c) => c.type !== "f");
  for (const c of [...foreign, ...keys]) await client.query(`ALTER TABLE ${c.tbl} DROP CONSTRAINT "${c.name}"`);
  for (const i of indexes) await client.query(`DROP INDEX ${i.name}`);
  await load();
  // A partitioned table's index reads "ON ONLY" (its partitions' indexes are attached one by one): built as one.
  for (const i of indexes) await client.query(i.def.replace(" ON ONLY ", " ON "));
  for (const c of [...keys, ...foreign]) await client.query(`ALTER TABLE ${c.tbl} ADD CONSTRAINT "${c.name}" ${c.def}`);
  return indexes.length + constraints.length;
}

/** Autovacuum may be off (it is on this machine): the bench leaves the tables as a vacuumed production table is. */
export async function vacuumAnalyze(client: pg.Client, tables: readonly string[]): Promise<void> {
  for (const table of tables) await client.query(`VACUUM (ANALYZE) ${table}`);
}

export async function seedTenants(client: pg.Client, size: SeedSize, at: Date): Promise<void> {
  await client.query(
    `INSERT INTO identity.tenant (tenant_id, name, server_limit, storage_quota_bytes, rate_limit_rps, rate_limit_burst,
                                  created_at, updated_at)
     SELECT bench_scale.uuid4('t', t), 'bench-' || t, 10, 1000000000000, 1000000, 1000000,
            $1::timestamptz - interval '60 days' + t * interval '1 second',
            $1::timestamptz - interval '60 days' + t * interval '1 second'
       FROM generate_series(1, $2::int) t`,
    [at, size.tenants],
  );
  await client.query(
    `INSERT INTO replays.tenant (tenant_id, storage_quota_bytes, plan_version)
     SELECT bench_scale.uuid4('t', t), 1000000000000, 1 FROM generate_series(1, $1::int) t`,
    [size.tenants],
  );
}

/** Subscription s belongs to tenant (s - 1) / 10 + 1; subscription 1 (tenant 1's) is the heavy one. */
export async function seedSubscriptions(client: pg.Client, size: SeedSize, at: Date): Promise<void> {
  await client.query(
    `INSERT INTO webhooks.subscription (subscription_id, tenant_id, url, events, secret, created_at)
     SELECT bench_scale.uuid4('s', s), bench_scale.uuid4('t', (s - 1) / 10 + 1),
            'https://hooks.example.com/t' || ((s - 1) / 10 + 1) || '/s' || s,
            CASE WHEN s % 3 = 0 THEN ARRAY['collection.finalized', 'asset.ready', 'asset.failed']
                 ELSE ARRAY['collection.finalized', 'asset.ready'] END,
            'whsec_' || rtrim(translate(encode(sha256(('s' || s)::bytea), 'base64'), '+/', '-_'), '='),
            $1::timestamptz - interval '45 days' + s * interval '10 milliseconds'
       FROM generate_series(1, $2::int) s`,
    [at, size.subscriptions],
  );
}

/**
 * Deliveries lo..hi (ended) with their attempts. Delivery i was created at the i-th point of the
 * DELIVERY_DAYS before `at`; every fifth goes to the heavy subscription, the others spread over the
 * rest; odd ones took three attempts (500, 500, then 200 or, one in five, 500 again: failed), even
 * ones one (200). Rows already there are left as they are (the retention pass's day written again).
 */
export async function seedDeliveries(client: pg.Client, size: SeedSize, at: Date, lo: number, hi: number) {
  await client.query(
    `WITH src AS (
       SELECT i, sub, n, created_at,
              CASE WHEN i % 10 = 1 THEN 'failed' ELSE 'succeeded' END AS status,
              CASE WHEN i % 7 = 0 THEN 'asset.ready' ELSE 'collection.finalized' END AS event,
              bench_scale.uuid4('e', i) AS event_id, bench_scale.uuid4('t', (sub - 1) / 10 + 1) AS tenant_id
         FROM (SELECT i,
                      CASE WHEN i % 5 = 0 THEN 1 ELSE 2 + (i::bigint * 7919) % ($3::int - 1) END AS sub,
                      CASE WHEN i % 2 = 0 THEN 1 ELSE 3 END AS n,
                      $4::timestamptz - make_interval(days => $5::int)
                        + ((i - 1)::float8 / $2::int) * make_interval(days => $5::int) AS created_at
                 FROM generate_series($1::int, $6::int) i) x
     ), d AS (
       INSERT INTO webhooks.delivery
              (delivery_id, tenant_id, subscription_id, event_id, event, body, status, retry_count, attempt_count,
               automatic_attempts, manual_queued, last_status_code, last_error, next_attempt_at, created_at, updated_at)
       SELECT bench_scale.uuid7('d', i, created_at), tenant_id, bench_scale.uuid4('s', sub), event_id, event,
              '{"event_id":"' || event_id || '","event":"' || event || '","created_at":"'
                || to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '","tenant_id":"'
                || tenant_id || '","data":{"collection":{"id":"' || bench_scale.uuid4('r', i) || '","replay_id":"'
                || bench_scale.uuid4('r', i) || '","server_id":"' || bench_scale.uuid4('v', sub)
                || '","state":"finalized","visibility":"staff","status":"processing","revoked":false,'
                || '"integration":"bench","quality":"standard","started_at":null,"ended_at":null,'
                || '"duration_ms":600000,"size_bytes":1048576,"format_version":1,"retention_until":null}}}',
              status, 0, n, n, 0,
              CASE WHEN status = 'failed' THEN 500 ELSE 200 END,
              CASE WHEN status = 'failed' THEN 'HTTP 500' END,
              NULL, created_at,
              created_at + CASE n WHEN 1 THEN 0 ELSE 305 END * interval '1 second'
                + (40 + 23 * n) * interval '1 millisecond'
         FROM src
       ON CONFLICT DO NOTHING
       RETURNING delivery_id, attempt_count, status, created_at
     )
     INSERT INTO webhooks.attempt (delivery_id, attempt, trigger, started_at, duration_ms, status_code, error)
     SELECT d.delivery_id, k, 'automatic',
            d.created_at + CASE k WHEN 1 THEN 0 WHEN 2 THEN 5 ELSE 305 END * interval '1 second',
            40 + 23 * k,
            CASE WHEN k = d.attempt_count AND d.status = 'succeeded' THEN 200 ELSE 500 END,
            CASE WHEN k = d.attempt_count AND d.status = 'succeeded' THEN NULL ELSE 'HTTP 500' END
       FROM d CROSS JOIN LATERAL generate_series(1, d.attempt_count) k`,
    [lo, size.deliveries, size.subscriptions, at, DELIVERY_DAYS, hi],
  );
}

/** The rows of delivery day `day` (0: the oldest), as seedDeliveries numbers them. */
export function deliveryDay(size: SeedSize, day: number): { lo: number; hi: number } {
  return {
    lo: Math.floor((day * size.deliveries) / DELIVERY_DAYS) + 1,
    hi: Math.floor(((day + 1) * size.deliveries) / DELIVERY_DAYS),
  };
}

/**
 * Replays lo..hi (ready, finished ten minutes after they started, spread over the 90 days before
 * `at`, kept for ten years so that no reaper acts on them), each in the markers service's projection
 * with its five markers. Every fifth is the heavy tenant's; each tenant records on four servers.
 */
export async function seedReplays(client: pg.Client, size: SeedSize, at: Date, lo: number, hi: number) {
  await client.query(
    `WITH src AS (
       SELECT r, bench_scale.uuid4('r', r) AS replay_id, bench_scale.uuid4('t', t) AS tenant_id,
              bench_scale.uuid4('v', t * 4 + r % 4) AS server_id, started_at
         FROM (SELECT r, CASE WHEN r % 5 = 0 THEN 1 ELSE 2 + (r::bigint * 7919) % ($3::int - 1) END AS t,
                      $4::timestamptz - interval '90 days' + ((r - 1)::float8 / $2::int) * interval '90 days' AS started_at
                 FROM generate_series($1::int, $5::int) r) x
     ), a AS (
       INSERT INTO replays.replay
              (replay_id, tenant_id, server_id, integration, quality, status, pipeline, started_at, ended_at,
               duration_ms, size_bytes, format_version, storage_tier, retention_until, hot_until, created_at)
       SELECT replay_id, tenant_id, server_id, 'bench', 'standard', 'ready', 'ended', started_at,
              started_at + interval '10 minutes', 600000, 1048576, 1, 'hot',
              $4::timestamptz + interval '3650 days', $4::timestamptz + interval '3650 days', started_at
         FROM src
     ), b AS (
       INSERT INTO markers.replay (replay_id, tenant_id, server_id, started_at, recording, finished, marker_count)
       SELECT replay_id, tenant_id, server_id, started_at, false, true, 5 FROM src
     )
     INSERT INTO markers.marker (marker_id, tenant_id, replay_id, server_id, tick, label, category, colour, created_at)
     SELECT bench_scale.uuid4('m', (r - 1) * 5 + k + 1), tenant_id, replay_id, server_id, 1000 * k + 500,
            'Bench marker ' || k, 'combat', '#FFAA00', started_at + k * interval '1 minute'
       FROM src CROSS JOIN generate_series(0, 4) k`,
    [lo, size.replays, size.tenants, at, hi],
  );
}

/**
 * What the current schema keeps beside seeded rows, written where a migration newer than the seed
 * added it: each subscription's row in webhooks.subscription_due (migration 006: 'infinity' once
 * nothing of it is pending, as a subscription with only ended deliveries has). Idempotent.
 */
export async function alignSeed(client: pg.Client): Promise<void> {
  const { rowCount } = await client.query(
    "SELECT 1 FROM information_schema.tables WHERE table_schema = 'webhooks' AND table_name = 'subscription_due'",
  );
  if (rowCount === 0) return;
  await client.query(
    `INSERT INTO webhooks.subscription_due (subscription_id, due_at)
     SELECT subscription_id, 'infinity' FROM webhooks.subscription
     ON CONFLICT (subscription_id) DO NOTHING`,
  );
}

export async function writeSeedRecord(client: pg.Client, record: SeedRecord): Promise<void> {
  await client.query("DELETE FROM bench_scale.seed");
  await client.query(
    `INSERT INTO bench_scale.seed (scale, seed_version, migrations, seeded_at, seed_ms, retention_pending)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [record.scale, record.seedVersion, record.migrations, record.seededAt, record.seedMs, record.retentionPending],
  );
}

export async function setRetentionPending(client: pg.Client, pending: boolean): Promise<void> {
  await client.query("UPDATE bench_scale.seed SET retention_pending = $1", [pending]);
}

/** Disk used by the database, in bytes. */
export async function databaseBytes(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ bytes: string }>("SELECT pg_database_size(current_database()) AS bytes");
  return Number(rows[0]?.bytes ?? 0);
}

function seconds(since: number): number {
  return Math.round((performance.now() - since) / 100) / 10;
}
