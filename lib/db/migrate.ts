import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { logger } from "../log.js";
import type { Db } from "./types.js";

const log = logger("lib:db:migrate");

const migrationFile = /^(\d{3})_[a-z0-9_]+\.sql$/;

/** `id` is unique within its schema and never changes once merged. */
export type Migration = { id: string; sql: string };

/** Refuses gaps, duplicates and stray files. */
export async function readMigrations(dir: string, prefix = ""): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((file) => file.endsWith(".sql")).sort();
  const migrations: Migration[] = [];
  for (const [index, file] of files.entries()) {
    const match = migrationFile.exec(file);
    if (!match) throw new Error(`migration ${join(dir, file)} is not named NNN_snake_name.sql`);
    if (Number(match[1]) !== index + 1)
      throw new Error(`migration ${file} breaks the 001, 002, ... sequence in ${dir}`);
    migrations.push({ id: `${prefix}${file}`, sql: await readFile(join(dir, file), "utf8") });
  }
  return migrations;
}

/**
 * Each migration in its own transaction under an advisory lock on the schema (replicas starting at once
 * wait), recorded in that transaction, so a crash never leaves one half-applied or unrecorded.
 */
export async function migrate(db: Db, migrations: readonly Migration[]): Promise<string[]> {
  const schema = db.schema;
  const applied: string[] = [];
  for (const migration of migrations) {
    const ran = await db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(hashtext('replay.migrate'), hashtext($1))", [schema]);
      await tx.exec(
        `CREATE SCHEMA IF NOT EXISTS ${schema};
         CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (
           id text PRIMARY KEY,
           applied_at timestamptz NOT NULL DEFAULT now()
         );`,
      );
      const seen = await tx.query(`SELECT 1 FROM ${schema}.schema_migrations WHERE id = $1`, [migration.id]);
      if (seen.rowCount > 0) return false;
      await tx.exec(migration.sql);
      await tx.query(`INSERT INTO ${schema}.schema_migrations (id) VALUES ($1)`, [migration.id]);
      return true;
    });
    if (ran) {
      applied.push(migration.id);
      log.info({ schema, migration: migration.id }, "applied migration");
    }
  }
  return applied;
}
