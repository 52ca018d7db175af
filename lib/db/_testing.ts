import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { inject } from "vitest";
import { createPgDb } from "./db.js";
import { createEmbeddedDb, openEmbeddedPostgres } from "./embedded.js";
import type { Db, Queryable, Tx } from "./types.js";

/**
 * A test database: `db` on the schema it was created for, and `dbFor` for more schemas of the same
 * database (the way the five services share one), so that tests of a file can share one database
 * and still not see each other's tables. Dispose closes every Db it handed out.
 */
export type TestDb = { db: Db; dbFor(schema: string): Db } & AsyncDisposable;

/**
 * A database of its own for one test: with `DATABASE_URL`, a Postgres database created through
 * that URL from the run's migrated template and dropped on dispose; without it, an in-memory
 * PGlite loaded from the same template. Every service schema is migrated already.
 */
export async function createTestDb(schema: string): Promise<TestDb> {
  const url = process.env.DATABASE_URL;
  if (!url) return createEmbeddedTestDb(schema);
  const database = await createTestDatabase(url);
  const opened: Db[] = [];
  const open = (dbSchema: string): Db => {
    const db = createPgDb({ url: database.url, schema: dbSchema, poolMax: 5 });
    opened.push(db);
    return db;
  };
  return {
    db: open(schema),
    dbFor: open,
    async [Symbol.asyncDispose]() {
      try {
        await Promise.all(opened.map((db) => db.close()));
      } finally {
        await database.drop();
      }
    },
  };
}

/**
 * A Postgres database of its own, created through `url` (DATABASE_URL) from the run's migrated
 * template: its URL, and `drop`, which ends its connections and drops it.
 */
export async function createTestDatabase(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `t_${randomBytes(8).toString("hex")}`;
  // Database statements take no parameters; `name` is generated above, never input. The template
  // (test/global-setup.ts) has every schema migrated already.
  const template = inject("templateDatabase");
  const admin = createPgDb({ url, schema: "public", poolMax: 1, applicationName: "test-admin" });
  try {
    await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  } catch (err) {
    await admin.close();
    throw err;
  }
  const testUrl = new URL(url);
  testUrl.pathname = `/${name}`;
  return {
    url: testUrl.toString(),
    async drop() {
      try {
        await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [name]);
        await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      } finally {
        await admin.close();
      }
    },
  };
}

/** A database mode a test can run in: the embedded one always, real Postgres when DATABASE_URL is set. */
export type TestDbMode = { name: "embedded" | "postgres"; open(schema: string): Promise<TestDb> };

/**
 * Both database modes where both can run, so that a test of a transactional rule proves it on the
 * single-connection embedded database and on a real pool alike.
 */
export function testDbModes(): TestDbMode[] {
  const modes: TestDbMode[] = [{ name: "embedded", open: createEmbeddedTestDb }];
  if (process.env.DATABASE_URL) modes.push({ name: "postgres", open: createTestDb });
  return modes;
}

let embeddedTemplate: Promise<Blob | undefined> | undefined;

/** The run's embedded database with every schema migrated, read once per test process. */
export function embeddedTemplateDump(): Promise<Blob | undefined> {
  embeddedTemplate ??= (async () => {
    const path = inject("embeddedTemplate");
    return path ? new Blob([await readFile(path)]) : undefined;
  })();
  return embeddedTemplate;
}

async function createEmbeddedTestDb(schema: string): Promise<TestDb> {
  const embedded = await openEmbeddedPostgres(undefined, { from: await embeddedTemplateDump() });
  return {
    db: createEmbeddedDb(embedded, schema),
    dbFor: (other) => createEmbeddedDb(embedded, other),
    [Symbol.asyncDispose]: () => embedded.close(),
  };
}

/**
 * How often Postgres planned each prepared statement of this connection whose text holds
 * `marker`, generically and custom (`pg_prepared_statements`; Postgres only: embedded mode sends
 * unnamed statements). Run it on the transaction whose statements it counts.
 */
export async function preparedPlans(q: Queryable, marker: string): Promise<{ generic: number; custom: number }[]> {
  const { rows } = await q.query<{ generic_plans: string; custom_plans: string }>(
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, $1) > 0",
    [marker],
  );
  return rows.map((r) => ({ generic: Number(r.generic_plans), custom: Number(r.custom_plans) }));
}

/**
 * Runs `work` in a transaction and leaves it open, holding its locks or its snapshot while the test goes on with other
 * connections: resolves once `work` is done, with what it returned and `end`, which commits and waits for the commit.
 * A `work` that fails rejects at once, so the test fails instead of waiting for a transaction that never got there.
 */
export async function holdTransaction<T>(
  db: Db,
  work: (tx: Tx) => Promise<T>,
): Promise<{ result: T; end(): Promise<void> }> {
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let done = (_result: T) => {};
  const worked = new Promise<T>((resolve) => {
    done = resolve;
  });
  const ended = db.transaction(async (tx) => {
    done(await work(tx));
    await released;
  });
  // Settles only if the transaction fails: a failure after `work` is end()'s to report.
  const failed = ended.then(() => new Promise<never>(() => {}));
  failed.catch(() => {});
  const result = await Promise.race([worked, failed]);
  return {
    result,
    end: async () => {
      release();
      await ended;
    },
  };
}
