import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../test/poll.js";
import { createTestDb } from "../db/_testing.js";
import { migrate } from "../db/migrate.js";
import type { Db } from "../db/types.js";
import { outboxMigrations } from "./outbox.js";
import { pruneEventTables, startRetentionWorker } from "./retention.js";

const hour = 3_600_000;
const windows = { eventsMs: 24 * hour, inboxMs: 48 * hour };

async function openTables(schema: string) {
  const testDb = await createTestDb(schema);
  await migrate(testDb.db, outboxMigrations(testDb.db.schema));
  return testDb;
}

/**
 * `due` published outbox rows and inbox rows past their windows, a minute apart, and `kept` rows of
 * each inside them, plus `kept` unpublished outbox rows older than any; resolves to the ids that
 * must stay.
 */
async function insertBacklog(db: Db, due: number, kept: number): Promise<{ outbox: string[]; inbox: string[] }> {
  const s = db.schema;
  const { rows: keptOutbox } = await db.query<{ event_id: string }>(
    `INSERT INTO ${s}.outbox (event_id, subject, payload, created_at, published_at)
     SELECT gen_random_uuid(), 's', ''::bytea, now() - interval '100 hours', NULL FROM generate_series(1, $1)
     UNION ALL
     SELECT gen_random_uuid(), 's', ''::bytea, now() - interval '2 hours', now() - i * interval '1 minute'
       FROM generate_series(1, $1) i
     RETURNING event_id`,
    [kept],
  );
  await db.query(
    `INSERT INTO ${s}.outbox (event_id, subject, payload, created_at, published_at)
     SELECT gen_random_uuid(), 's', ''::bytea, now() - interval '30 hours', now() - interval '25 hours' - i * interval '1 minute'
       FROM generate_series(1, $1) i`,
    [due],
  );
  const { rows: keptInbox } = await db.query<{ event_id: string }>(
    `INSERT INTO ${s}.inbox (consumer, event_id, processed_at)
     SELECT 'c', gen_random_uuid(), now() - interval '47 hours' + i * interval '1 minute' FROM generate_series(1, $1) i
     RETURNING event_id`,
    [kept],
  );
  await db.query(
    `INSERT INTO ${s}.inbox (consumer, event_id, processed_at)
     SELECT 'c', gen_random_uuid(), now() - interval '49 hours' - i * interval '1 minute' FROM generate_series(1, $1) i`,
    [due],
  );
  return { outbox: keptOutbox.map((row) => row.event_id), inbox: keptInbox.map((row) => row.event_id) };
}

async function eventIds(db: Db, table: "outbox" | "inbox"): Promise<string[]> {
  const { rows } = await db.query<{ event_id: string }>(`SELECT event_id FROM ${db.schema}.${table}`);
  return rows.map((row) => row.event_id).sort();
}

type SeenDelete = { table: string; tx: string; rows: number; outOfOrder: boolean };

/**
 * Records every DELETE on the two tables as the database saw it; resolves to a reader of the
 * record: each statement's table, transaction and row count, and whether it removed a row newer
 * than one a later statement on the same table removed.
 */
async function recordDeletes(db: Db): Promise<() => Promise<SeenDelete[]>> {
  const s = db.schema;
  await db.transaction((tx) =>
    tx.exec(`
      CREATE TABLE ${s}.deleted (
        id serial PRIMARY KEY, tbl text, tx bigint, rows int, oldest timestamptz, newest timestamptz);
      CREATE FUNCTION ${s}.record_delete() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_TABLE_NAME = 'outbox' THEN
          INSERT INTO ${s}.deleted (tbl, tx, rows, oldest, newest)
            SELECT 'outbox', txid_current(), count(*), min(published_at), max(published_at) FROM gone;
        ELSE
          INSERT INTO ${s}.deleted (tbl, tx, rows, oldest, newest)
            SELECT 'inbox', txid_current(), count(*), min(processed_at), max(processed_at) FROM gone;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER outbox_deleted AFTER DELETE ON ${s}.outbox
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${s}.record_delete();
      CREATE TRIGGER inbox_deleted AFTER DELETE ON ${s}.inbox
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION ${s}.record_delete();
    `),
  );
  return async () => {
    const { rows } = await db.query<{ tbl: string; tx: string; rows: number; out_of_order: boolean | null }>(
      `SELECT tbl, tx::text, rows,
              newest > min(oldest) OVER (PARTITION BY tbl ORDER BY id ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
                AS out_of_order
         FROM ${s}.deleted ORDER BY id`,
    );
    return rows.map((row) => ({ table: row.tbl, tx: row.tx, rows: row.rows, outOfOrder: row.out_of_order === true }));
  };
}

describe("event retention", () => {
  it("deletes published outbox rows and inbox rows past their windows, and nothing else", async () => {
    await using testDb = await openTables("bus_retention_test");
    const { db } = testDb;
    const [oldPublished, recentPublished, oldUnpublished] = [randomUUID(), randomUUID(), randomUUID()];
    await db.query(
      `INSERT INTO bus_retention_test.outbox (event_id, subject, payload, created_at, published_at)
       VALUES ($1, 's', '', now() - interval '30 hours', now() - interval '25 hours'),
              ($2, 's', '', now() - interval '2 hours', now() - interval '1 hour'),
              ($3, 's', '', now() - interval '30 hours', NULL)`,
      [oldPublished, recentPublished, oldUnpublished],
    );
    const [oldInbox, recentInbox] = [randomUUID(), randomUUID()];
    await db.query(
      `INSERT INTO bus_retention_test.inbox (consumer, event_id, processed_at)
       VALUES ('c', $1, now() - interval '49 hours'), ('c', $2, now() - interval '47 hours')`,
      [oldInbox, recentInbox],
    );

    const pruned = await pruneEventTables(db, windows);
    expect([pruned.outbox.rows, pruned.inbox.rows]).toEqual([1, 1]);

    // An unpublished row is never pruned, however old: it has not reached the broker yet.
    expect(await eventIds(db, "outbox")).toEqual([recentPublished, oldUnpublished].sort());
    expect(await eventIds(db, "inbox")).toEqual([recentInbox]);
  });

  it("works through a backlog larger than a batch in bounded DELETEs, oldest first, each its own transaction", async () => {
    await using testDb = await openTables("bus_retention_test");
    const { db } = testDb;
    const kept = await insertBacklog(db, 250, 20);
    const deletes = await recordDeletes(db);

    const steps = { rows: 250, statements: 3, rowsPerStatementMax: 100 };
    expect(await pruneEventTables(db, windows, 100)).toEqual({ outbox: steps, inbox: steps });

    expect(await eventIds(db, "outbox")).toEqual(kept.outbox.sort());
    expect(await eventIds(db, "inbox")).toEqual(kept.inbox.sort());
    const seen = await deletes();
    expect(seen.map(({ table, rows }) => `${table} ${rows}`)).toEqual([
      "outbox 100",
      "inbox 100",
      "outbox 100",
      "inbox 100",
      "outbox 50",
      "inbox 50",
    ]);
    expect(seen.filter((d) => d.outOfOrder)).toEqual([]);
    // No transaction spans two batches, so none holds a snapshot across the pass.
    expect(new Set(seen.map(({ tx }) => tx)).size).toBe(seen.length);
  });

  it("reads the indexes its batches need", async () => {
    await using testDb = await openTables("bus_retention_test");
    const { rows } = await testDb.db.query<{ indexdef: string }>(
      "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname IN ('outbox_published_at', 'inbox_processed_at') ORDER BY indexname",
      [testDb.db.schema],
    );
    expect(rows.map((row) => row.indexdef.replace(/ USING btree/, ""))).toEqual([
      "CREATE INDEX inbox_processed_at ON bus_retention_test.inbox (processed_at)",
      "CREATE INDEX outbox_published_at ON bus_retention_test.outbox (published_at) WHERE (published_at IS NOT NULL)",
    ]);
  });

  it("catches up a backlog in back-to-back rounds, not one batch an interval", async () => {
    await using testDb = await openTables("bus_retention_test");
    const { db } = testDb;
    const kept = await insertBacklog(db, 250, 5);
    const deletes = await recordDeletes(db);

    // The interval is an hour: only rounds run at once after a full batch can finish the backlog.
    await using _worker = startRetentionWorker(db, windows, { batchSize: 100 });
    await waitFor("the backlog pruned", async () => (await eventIds(db, "inbox")).length === kept.inbox.length);
    await waitFor("the backlog pruned", async () => (await eventIds(db, "outbox")).length === kept.outbox.length);
    expect(await eventIds(db, "outbox")).toEqual(kept.outbox.sort());
    const seen = await deletes();
    expect(Math.max(...seen.map(({ rows }) => rows))).toBe(100);
    expect(seen.filter((d) => d.outOfOrder)).toEqual([]);
  });
});
