import { execFile } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  defaultTemplateDir,
  ensureTemplate,
  pgliteVersion,
  seedFromTemplate,
  templatePath,
} from "./embedded-template.js";

const root = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/dist\/?$/, "/");

async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A copy of the package's template (built by `npm run build`, or here) in a cache directory of the test's own. */
async function templateCopy(): Promise<string> {
  const { dir } = await ensureTemplate(defaultTemplateDir());
  const cache = await tempDir("replay-template-");
  cpSync(dir, templatePath(cache), { recursive: true });
  return cache;
}

/** A data directory as openEmbeddedPostgres hands it over: holding only its lock. */
async function lockedDataDir(): Promise<string> {
  const dataDir = await tempDir("replay-seed-");
  writeFileSync(join(dataDir, "replay.lock"), "1");
  return dataDir;
}

describe("the embedded database's initdb template", () => {
  it("a new data directory becomes a whole cluster from the template, PG_VERSION included", async () => {
    const cache = await templateCopy();
    const dataDir = await lockedDataDir();
    expect(seedFromTemplate(cache, dataDir)).toEqual({ ok: true, template: templatePath(cache) });
    const entries = readdirSync(dataDir).sort();
    expect(entries).toEqual([...readdirSync(join(templatePath(cache), "pgdata")), "replay.lock"].sort());
    expect(readFileSync(join(dataDir, "PG_VERSION"), "utf8").trim()).toMatch(/^\d+$/);
    // Empty directories Postgres needs (pg_tblspc, pg_snapshots, ...) are copied too.
    expect(existsSync(join(dataDir, "pg_tblspc"))).toBe(true);
  });

  it("a damaged template is refused while copying, and nothing of it stays in the data directory", async () => {
    const cache = await templateCopy();
    const catalog = join(templatePath(cache), "pgdata", "global", "pg_control");
    const bytes = readFileSync(catalog);
    bytes[100] = (bytes[100] as number) ^ 0xff;
    writeFileSync(catalog, bytes);
    const dataDir = await lockedDataDir();
    const seeded = seedFromTemplate(cache, dataDir);
    expect(seeded.ok).toBe(false);
    expect(!seeded.ok && seeded.reason).toMatch(/does not match its manifest/);
    expect(readdirSync(dataDir)).toEqual(["replay.lock"]);
  });

  it("uses no template of another PGlite version, and says so when there is none", async () => {
    const cache = await templateCopy();
    const dataDir = await lockedDataDir();
    const manifestPath = join(templatePath(cache), "template.json");
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
    writeFileSync(manifestPath, JSON.stringify({ ...manifest, pglite: "0.0.1" }));
    const other = seedFromTemplate(cache, dataDir);
    expect(!other.ok && other.reason).toMatch(`made by PGlite 0.0.1, not ${pgliteVersion()}`);
    const empty = await tempDir("replay-template-");
    const none = seedFromTemplate(empty, dataDir);
    expect(!none.ok && none.reason).toMatch(/^no template in /);
    expect(readdirSync(dataDir)).toEqual(["replay.lock"]);
  });

  // The builds run as `npm run build` runs them, in processes of their own (an initdb costs a process ~850 MiB).
  it("builds in one place when started concurrently, leaves a whole template alone and rebuilds a damaged one", async () => {
    const cache = await tempDir("replay-template-build-");
    const script = join(root, "dist", "lib", "db", "prepare-template.js");
    const build = async () => (await promisify(execFile)(process.execPath, [script, cache], { cwd: root })).stderr;
    const outputs = await Promise.all([build(), build()]);
    expect(readdirSync(cache)).toEqual([`pglite-${pgliteVersion()}`]);
    // Each either built the template or found the other's in place; neither failed.
    for (const stderr of outputs) expect(stderr).not.toMatch(/not built/);
    expect(seedFromTemplate(cache, await lockedDataDir()).ok).toBe(true);

    const manifest = join(templatePath(cache), "template.json");
    const before = readFileSync(manifest, "utf8");
    expect(await build()).toBe("");
    expect(readFileSync(manifest, "utf8")).toBe(before);

    writeFileSync(join(templatePath(cache), "pgdata", "PG_VERSION"), "99\n");
    expect(seedFromTemplate(cache, await lockedDataDir()).ok).toBe(false);
    expect(await build()).toMatch(/^embedded database template: built /);
    expect(readdirSync(cache)).toEqual([`pglite-${pgliteVersion()}`]);
    expect(seedFromTemplate(cache, await lockedDataDir()).ok).toBe(true);
  }, 180_000);
});
