import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { identityMigrations } from "../gateway/main.js";
import { createPgDb } from "../lib/db/db.js";
import { createEmbeddedDb, openEmbeddedPostgres } from "../lib/db/embedded.js";
import type { Migration } from "../lib/db/migrate.js";
import { migrate } from "../lib/db/migrate.js";
import type { Db } from "../lib/db/types.js";
import { schemaMigrations } from "../lib/service-host.js";
import { markersService } from "../services/markers/main.js";
import { replaysService } from "../services/replays/main.js";
import { serversService } from "../services/servers/main.js";
import { webhooksService } from "../services/webhooks/main.js";

/** Every schema with the migrations its process applies at start. */
async function everySchema(): Promise<{ schema: string; migrations: Migration[] }[]> {
  const services = [markersService, serversService, replaysService, webhooksService];
  return [
    { schema: "identity", migrations: await identityMigrations() },
    ...(await Promise.all(
      services.map(async (spec) => ({
        schema: spec.name,
        migrations: await schemaMigrations(spec.name, spec.migrationsDir),
      })),
    )),
  ];
}

async function migrateAll(openDb: (schema: string) => Db): Promise<void> {
  for (const { schema, migrations } of await everySchema()) await migrate(openDb(schema), migrations);
}

/**
 * A Postgres database beside DATABASE_URL's with every schema migrated, for per-file test
 * databases to be created from (`CREATE DATABASE … TEMPLATE`). No connection to it stays open.
 */
export async function createPostgresTemplate(url: string): Promise<{ name: string; drop(): Promise<void> }> {
  const name = `tpl_${randomBytes(6).toString("hex")}`;
  const admin = createPgDb({ url, schema: "public", poolMax: 1, applicationName: "test-template" });
  await admin.query(`CREATE DATABASE ${name}`);
  const templateUrl = new URL(url);
  templateUrl.pathname = `/${name}`;
  const opened: Db[] = [];
  try {
    await migrateAll((schema) => {
      const db = createPgDb({ url: templateUrl.toString(), schema, poolMax: 1 });
      opened.push(db);
      return db;
    });
  } finally {
    await Promise.all(opened.map((db) => db.close()));
  }
  return {
    name,
    async drop() {
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await admin.close();
      }
    },
  };
}

/** The embedded database with every schema migrated, dumped to `path` for in-memory test databases to load. */
export async function writeEmbeddedTemplate(path: string): Promise<void> {
  const embedded = await openEmbeddedPostgres(undefined);
  try {
    await migrateAll((schema) => createEmbeddedDb(embedded, schema));
    const dump = await embedded.pglite.dumpDataDir("none");
    await writeFile(path, Buffer.from(await dump.arrayBuffer()));
  } finally {
    await embedded.close();
  }
}
