import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { file_replay_events_v1_identity } from "../gen/replay/events/v1/identity_pb.js";
import { file_replay_events_v1_replays } from "../gen/replay/events/v1/replays_pb.js";
import { file_replay_events_v1_servers } from "../gen/replay/events/v1/servers_pb.js";
import { eventSchemas } from "../lib/bus/events.js";

const root = fileURLToPath(new URL("..", import.meta.url));

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) out.push(...sources(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

/**
 * Every module a source names: `import … from`, `export … from`, side-effect `import "x"` and
 * dynamic `import("x")`. Relative specifiers are resolved against the file; packages stay as named.
 */
export function specifiers(text: string): string[] {
  const found = text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["'`]([^"'`]+)["'`]/g);
  return [...found].map((m) => m[1] as string);
}

function imports(file: string): string[] {
  const text = readFileSync(join(root, file), "utf8");
  return specifiers(text).map((spec) => (spec.startsWith(".") ? join(file, "..", spec) : spec));
}

const code = (file: string) => !file.endsWith(".test.ts") && !file.includes("_testing");

// The two process entries hand the environment over (`loadConfig(process.env…)`, `main(…, process.env)`);
// any other mention of process.env, however spelled, is a read.
const ENTRIES = ["start.ts", "cli/run.ts"];
export function envReads(text: string, entry: boolean): string[] {
  const handed = entry ? text.replace(/[(,]\s*process\.env\s*[,)]/g, "") : text;
  return (
    handed.match(/process\s*\.\s*env\b|process\s*\[\s*["'`]env["'`]\s*\]|\{[^}]*\benv\b[^}]*\}\s*=\s*process\b/g) ?? []
  );
}

// An SQL statement in a string or template literal: a statement verb, upper case as our SQL is
// written, opening the literal and followed by SQL (INSERT INTO, SELECT … FROM, …).
export function sqlStatements(text: string): string[] {
  return (
    text.match(
      /["'`]\s*(SELECT\s[\s\S]*?\bFROM\b|INSERT\s+INTO\b|UPDATE\s+\w[\w.]*\s+SET\b|DELETE\s+FROM\b|(CREATE|ALTER|DROP|TRUNCATE)\s+(TABLE|SCHEMA|INDEX|DATABASE)\b|WITH\s+\w+\s+AS\s*\()/g,
    ) ?? []
  );
}

// lib/ holds SQL only where it owns tables: lib/db (each schema's migration log) and lib/bus (each
// schema's outbox and inbox, the embedded bus's cursor). A schema prefix that is a variable
// (`${schema}.outbox`) counts as the table's own.
const LIB_SQL_DIRS = ["lib/db/", "lib/bus/"];
const LIB_TABLES = new Set(["schema_migrations", "outbox", "inbox", "bus.cursor"]);

/** The string and template literals of a source that hold an SQL statement. */
export function sqlLiterals(text: string): string[] {
  const literals = text.match(/`(?:[^`\\]|\\.)*`|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/g) ?? [];
  return literals.filter((literal) => sqlStatements(literal).length > 0);
}

/** The tables a statement names after FROM, JOIN, INTO, UPDATE or TABLE (functions such as unnest(...) left out). */
export function tablesNamed(sql: string): string[] {
  const found = sql.matchAll(
    /\b(?:FROM|JOIN|INTO|UPDATE|TABLE(?:\s+IF\s+NOT\s+EXISTS)?)\s+(?:\$\{[^}]*\}\.)?([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)?)(?![a-z0-9_.]*\s*\()/g,
  );
  return [...found].map((m) => m[1] as string);
}

describe("import boundaries (STYLE.md §3)", () => {
  it("a service never imports another service or the gateway", () => {
    for (const file of sources("services")) {
      const own = file.split("/")[1];
      for (const target of imports(file)) {
        expect(target.startsWith("gateway/"), `${file} imports ${target}`).toBe(false);
        if (target.startsWith("services/")) expect(target.split("/")[1], `${file} imports ${target}`).toBe(own);
      }
    }
  });

  it("the gateway never imports a service: it talks to them through gen/ clients", () => {
    for (const file of sources("gateway")) {
      for (const target of imports(file))
        expect(target.startsWith("services/"), `${file} imports ${target}`).toBe(false);
    }
  });

  it("lib/ imports neither services nor the gateway", () => {
    for (const file of sources("lib")) {
      for (const target of imports(file)) {
        expect(/^(services|gateway)\//.test(target), `${file} imports ${target}`).toBe(false);
      }
    }
  });

  it("only lib/config.ts reads process.env and only the process entries handle signals and exit codes", () => {
    const all = [
      ...sources("lib"),
      ...sources("services"),
      ...sources("gateway"),
      ...sources("cli"),
      "start.ts",
      "start-all.ts",
    ];
    for (const file of all.filter(code)) {
      const text = readFileSync(join(root, file), "utf8");
      const entry = ENTRIES.includes(file);
      if (file !== "lib/config.ts") expect(envReads(text, entry), `${file} reads process.env`).toEqual([]);
      if (!entry)
        expect(/process\.(on|once|exit|exitCode)\b/.test(text), `${file} touches process lifecycle`).toBe(false);
    }
  });

  it("SQL lives in store files (store.ts, <concept>-store.ts): no statement anywhere else in services/, gateway/ or cli/", () => {
    const all = [...sources("services"), ...sources("gateway"), ...sources("cli")].filter(code);
    for (const file of all.filter((f) => !/\/([a-z]+-)?store\.ts$/.test(f))) {
      expect(sqlStatements(readFileSync(join(root, file), "utf8")), `${file} holds SQL`).toEqual([]);
    }
  });

  it("SQL in lib/ lives in lib/db and lib/bus and names only their own tables (a service's tables are its store's)", () => {
    for (const file of sources("lib").filter(code)) {
      const literals = sqlLiterals(readFileSync(join(root, file), "utf8"));
      if (!LIB_SQL_DIRS.some((dir) => file.startsWith(dir))) {
        expect(literals, `${file} holds SQL`).toEqual([]);
        continue;
      }
      const foreign = literals.flatMap(tablesNamed).filter((table) => !LIB_TABLES.has(table));
      expect(foreign, `${file} names tables that are not lib's own`).toEqual([]);
    }
  });

  it("cli/ (replayctl) imports only gen/, lib/, its own files and packages: never a service or the gateway", () => {
    for (const file of sources("cli")) {
      for (const target of imports(file)) {
        expect(/^(services|gateway|test)\//.test(target), `${file} imports ${target}`).toBe(false);
      }
    }
  });

  it("the checkers catch what they look for (so the rules above can fail)", () => {
    expect(
      specifiers(
        [
          'import { a } from "./a.js";',
          'import "./side-effect.js";',
          'export { b } from "../b.js";',
          'export * from "./c.js";',
          'const d = await import("../services/d.js");',
          "const e = await import(`./e.js`);",
          'import type { F } from "pkg";',
        ].join("\n"),
      ),
    ).toEqual(["./a.js", "./side-effect.js", "../b.js", "./c.js", "../services/d.js", "./e.js", "pkg"]);
    for (const read of [
      "const url = process.env.X;",
      'const url = process["env"].X;',
      "const { env } = process;",
      "const { argv, env: e } = process;",
      "const n = process . env;",
    ]) {
      expect(envReads(read, false), read).not.toEqual([]);
    }
    expect(envReads("main(argv, process.env);", true)).toEqual([]);
    expect(envReads("loadConfig(process.env, name);", true)).toEqual([]);
    expect(envReads("const x = process.env.PORT;", true)).not.toEqual([]);
    for (const sql of [
      'db.query("SELECT id FROM servers.server WHERE x = $1")',
      "tx.query(`INSERT INTO servers.server (a) VALUES ($1)`)",
      "q.query(`UPDATE servers.server SET a = 1`)",
      "q.query('DELETE FROM identity.nonce')",
      'db.query("CREATE TABLE x.y (a int)")',
      "q.query(`\n  WITH recent AS (SELECT 1) SELECT * FROM recent`)",
    ]) {
      expect(sqlStatements(sql), sql).not.toEqual([]);
    }
    for (const prose of ['throw new Error("Select a server from the list")', '"updated settings"', '"deleted"']) {
      expect(sqlStatements(prose), prose).toEqual([]);
    }
    expect(
      sqlLiterals(
        'const a = "prose"; q.query(`SELECT n FROM ' + "$" + "{schema}.outbox o JOIN webhooks.delivery d ON true`);",
      ),
    ).toHaveLength(1);
    expect(tablesNamed(`SELECT n FROM \${schema}.outbox o JOIN webhooks.delivery d ON true`)).toEqual([
      "outbox",
      "webhooks.delivery",
    ]);
    expect(
      tablesNamed(`INSERT INTO \${assertSchemaName(s)}.inbox SELECT * FROM unnest($1::uuid[]) FOR UPDATE SKIP LOCKED`),
    ).toEqual(["inbox"]);
  });

  it("only lib/db/db.ts imports pg", () => {
    for (const file of [...sources("lib"), ...sources("services"), ...sources("gateway")].filter(code)) {
      const usesPg = imports(file).some((target) => target.endsWith("/pg") || target === "pg");
      const text = readFileSync(join(root, file), "utf8");
      expect(usesPg || /from "pg"/.test(text), `${file} imports pg`).toBe(file === "lib/db/db.ts");
    }
  });

  it("nothing but generated code lives under gen/, and every proto has its generated file", () => {
    for (const file of sources("gen")) expect(file.endsWith("_pb.ts"), file).toBe(true);
    const protos = (function walk(dir: string): string[] {
      return readdirSync(join(root, dir)).flatMap((name) => {
        const path = join(dir, name);
        return statSync(join(root, path)).isDirectory() ? walk(path) : path.endsWith(".proto") ? [path] : [];
      });
    })("proto");
    for (const proto of protos) {
      const generated = relative("proto", proto).replace(/\.proto$/, "_pb.ts");
      expect(sources("gen").includes(join("gen", generated)), `gen/${generated}`).toBe(true);
    }
  });
});

describe("events (ARCHITECTURE.md §Events)", () => {
  it("every message of proto/replay/events/v1 has exactly one subject, <producer>.<entity>.<verb> ↔ <Entity><Verb>", () => {
    const files = {
      identity: file_replay_events_v1_identity,
      servers: file_replay_events_v1_servers,
      replays: file_replay_events_v1_replays,
    };
    const events = Object.entries(files).flatMap(([producer, file]) =>
      file.messages
        .filter((m) => m.fields.some((f) => f.name === "event_id"))
        .map((m) => ({ producer, name: m.name, typeName: m.typeName })),
    );
    const bySchema = new Map<string, string>(
      Object.entries(eventSchemas).map(([subject, schema]) => [schema.typeName, subject]),
    );
    expect(bySchema.size).toBe(Object.keys(eventSchemas).length);
    for (const event of events) {
      const subject = bySchema.get(event.typeName);
      expect(subject, `${event.typeName} has a subject`).toBeDefined();
      const [producer, entity, verb] = (subject as string).split(".");
      expect(producer).toBe(event.producer);
      const pascal = (s: string) => s.replace(/(^|_)([a-z])/g, (_m, _u, c: string) => c.toUpperCase());
      expect(`${pascal(entity as string)}${pascal(verb as string)}`).toBe(event.name);
    }
    expect(events).toHaveLength(Object.keys(eventSchemas).length);
  });

  it("every event carries event_id, tenant_id and occurred_at as fields 1 to 3", () => {
    for (const schema of Object.values(eventSchemas)) {
      expect(
        schema.fields.slice(0, 3).map((f) => [f.number, f.name]),
        schema.typeName,
      ).toEqual([
        [1, "event_id"],
        [2, "tenant_id"],
        [3, "occurred_at"],
      ]);
    }
  });
});
