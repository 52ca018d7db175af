import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import {
  defaultTemplateDir,
  ensureTemplate,
  type MakeCluster,
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

/** Stands in for initdb: a small cluster naming its maker, held until the test releases it. */
function fakeMaker(name: string): {
  make: MakeCluster;
  started: Promise<void>;
  release: () => void;
  calls: () => number;
} {
  let calls = 0;
  let start = () => {};
  let release = () => {};
  const started = new Promise<void>((resolve) => {
    start = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const make = async (pgdata: string) => {
    calls++;
    mkdirSync(join(pgdata, "global"));
    mkdirSync(join(pgdata, "pg_tblspc"));
    writeFileSync(join(pgdata, "global", "maker"), name);
    writeFileSync(join(pgdata, "PG_VERSION"), "17\n");
    start();
    await released;
  };
  return { make, started, release, calls: () => calls };
}

/** The maker's name, read from a data directory seeded from the cache's template. */
async function seededMaker(cache: string): Promise<string> {
  const dataDir = await lockedDataDir();
  expect(seedFromTemplate(cache, dataDir).ok).toBe(true);
  return readFileSync(join(dataDir, "global", "maker"), "utf8");
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

  it("builds in one place when two builds race: the first to finish keeps it, the other uses it", async () => {
    const cache = await tempDir("replay-template-race-");
    const dir = templatePath(cache);
    const early = fakeMaker("early");
    const late = fakeMaker("late");
    const earlyBuild = ensureTemplate(cache, early.make);
    const lateBuild = ensureTemplate(cache, late.make);
    // Both hold a cluster in a build directory of their own before either renames; the one started
    // second finishes first, so the winner is decided by the rename, not by the order of the calls.
    await Promise.all([early.started, late.started]);
    expect(readdirSync(cache).filter((name) => name.startsWith(".build-"))).toHaveLength(2);
    late.release();
    expect(await lateBuild).toEqual({ dir, created: true });
    early.release();
    expect(await earlyBuild).toEqual({ dir, created: false });
    expect(readdirSync(cache)).toEqual([`pglite-${pgliteVersion()}`]);
    expect(await seededMaker(cache)).toBe("late");
  });

  it("leaves a whole template alone, and rebuilds a damaged one in place of every other", async () => {
    const cache = await tempDir("replay-template-rebuild-");
    const dir = templatePath(cache);
    const first = fakeMaker("first");
    first.release();
    expect(await ensureTemplate(cache, first.make)).toEqual({ dir, created: true });
    const manifest = join(dir, "template.json");
    const before = readFileSync(manifest, "utf8");

    const again = fakeMaker("again");
    again.release();
    expect(await ensureTemplate(cache, again.make)).toEqual({ dir, created: false });
    expect(again.calls()).toBe(0);
    expect(readFileSync(manifest, "utf8")).toBe(before);

    writeFileSync(join(dir, "pgdata", "PG_VERSION"), "99\n");
    expect(seedFromTemplate(cache, await lockedDataDir()).ok).toBe(false);
    mkdirSync(join(cache, "pglite-0.0.1"));
    const rebuild = fakeMaker("rebuild");
    rebuild.release();
    expect(await ensureTemplate(cache, rebuild.make)).toEqual({ dir, created: true });
    expect(rebuild.calls()).toBe(1);
    expect(readdirSync(cache)).toEqual([`pglite-${pgliteVersion()}`]);
    expect(await seededMaker(cache)).toBe("rebuild");
  });

  // The one real initdb, run as `npm run build` runs it: in a process of its own (it costs ~850 MiB).
  it("the build script leaves a whole template alone and rebuilds a damaged one with PGlite", async () => {
    const cache = await templateCopy();
    const script = join(root, "dist", "lib", "db", "prepare-template.js");
    const build = async () => (await promisify(execFile)(process.execPath, [script, cache], { cwd: root })).stderr;
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
