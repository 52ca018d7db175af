import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createTestDb } from "./_testing.js";
import { migrate, readMigrations } from "./migrate.js";

const migrations = [
  { id: "001_widgets.sql", sql: "CREATE TABLE shop.widget (id int PRIMARY KEY); INSERT INTO shop.widget VALUES (1);" },
  { id: "002_gadgets.sql", sql: "CREATE TABLE shop.gadget (id int PRIMARY KEY);" },
  { id: "003_more_widgets.sql", sql: "INSERT INTO shop.widget VALUES (2), (3);" },
];

describe("migrate", () => {
  it("applies each migration once when several replicas start at once", async () => {
    await using test = await createTestDb("shop");
    const runs = await Promise.all(Array.from({ length: 4 }, () => migrate(test.db, migrations)));
    expect(runs.flat().sort()).toEqual(migrations.map((m) => m.id));
    const { rows } = await test.db.query<{ n: number }>("SELECT count(*)::int AS n FROM shop.widget");
    expect(rows[0]?.n).toBe(3);
    const recorded = await test.db.query<{ id: string }>("SELECT id FROM shop.schema_migrations ORDER BY id");
    expect(recorded.rows.map((r) => r.id)).toEqual(migrations.map((m) => m.id));
  });

  it("applies only what is new on a later start", async () => {
    await using test = await createTestDb("shop");
    await migrate(test.db, migrations.slice(0, 2));
    expect(await migrate(test.db, migrations)).toEqual(["003_more_widgets.sql"]);
    expect(await migrate(test.db, migrations)).toEqual([]);
  });

  it("leaves a failing migration neither half-applied nor recorded, and stops there", async () => {
    await using test = await createTestDb("shop");
    const broken = [
      migrations[0],
      { id: "002_broken.sql", sql: "CREATE TABLE shop.half (id int); SELECT 1/0;" },
      migrations[1],
    ];
    await expect(migrate(test.db, broken as typeof migrations)).rejects.toThrow();
    const half = await test.db.query(
      "SELECT 1 FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = 'half'",
    );
    expect(half.rowCount).toBe(0);
    const recorded = await test.db.query<{ id: string }>("SELECT id FROM shop.schema_migrations");
    expect(recorded.rows.map((r) => r.id)).toEqual(["001_widgets.sql"]);
  });
});

describe("readMigrations", () => {
  it("reads NNN_name.sql files in order", async () => {
    const dir = await mkdtemp(join(tmpdir(), "migrations-"));
    await writeFile(join(dir, "002_second.sql"), "SELECT 2;");
    await writeFile(join(dir, "001_first.sql"), "SELECT 1;");
    expect((await readMigrations(dir, "x/")).map((m) => m.id)).toEqual(["x/001_first.sql", "x/002_second.sql"]);
  });

  it("refuses a gap in the sequence and a stray name", async () => {
    const gap = await mkdtemp(join(tmpdir(), "migrations-"));
    await writeFile(join(gap, "001_first.sql"), "SELECT 1;");
    await writeFile(join(gap, "003_third.sql"), "SELECT 3;");
    await expect(readMigrations(gap)).rejects.toThrow(/sequence/);
    const stray = await mkdtemp(join(tmpdir(), "migrations-"));
    await writeFile(join(stray, "1_first.sql"), "SELECT 1;");
    await expect(readMigrations(stray)).rejects.toThrow(/NNN_snake_name/);
  });
});
