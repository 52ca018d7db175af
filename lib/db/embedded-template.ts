import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { sourceFolder } from "../paths.js";

/**
 * A fresh PGlite cluster's files, made once per PGlite version at build time and copied into a new DATA_DIR:
 * initdb in the process, or loading a dump, costs far more (docs/performance.md). Built under a temporary
 * name and renamed into place, so readers see a whole template or none; a SHA-256 of every path and byte,
 * checked while copying, makes a damaged template fall back to initdb.
 */

const MANIFEST = "template.json";
const PGDATA = "pgdata";
/** A cluster whose PG_VERSION exists is whole: PGlite resumes it instead of running initdb, so it is written last. */
export const CLUSTER_MARKER = "PG_VERSION";
const STALE_BUILD_MS = 3_600_000;

type Manifest = { pglite: string; entries: number; bytes: number; sha256: string; createdAt: string };

export function defaultTemplateDir(): string {
  return sourceFolder(import.meta.url, "../../node_modules/.cache/replay-service");
}

/** Keys the template: another version's files are never used. */
export function pgliteVersion(): string {
  let dir = dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
  for (;;) {
    const path = join(dir, "package.json");
    if (existsSync(path)) {
      const pkg = JSON.parse(readFileSync(path, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "@electric-sql/pglite" && typeof pkg.version === "string") return pkg.version;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error("cannot find @electric-sql/pglite's package.json");
    dir = parent;
  }
}

export function templatePath(cacheDir: string, version = pgliteVersion()): string {
  return join(cacheDir, `pglite-${version}`);
}

/** Fills an empty directory with a fresh cluster, PG_VERSION included. */
export type MakeCluster = (pgdata: string) => Promise<void>;

/** PGlite's initdb, run in this process. */
async function initdbCluster(pgdata: string): Promise<void> {
  const { PGlite } = await import("@electric-sql/pglite");
  const pglite = new PGlite(pgdata);
  await pglite.waitReady;
  await pglite.close();
}

/**
 * Unless a whole one is there; prunes other versions. Safe concurrently: the first rename wins. `makeCluster`
 * is initdb outside tests, which pass a stand-in to hold builds at a chosen point.
 */
export async function ensureTemplate(
  cacheDir: string,
  makeCluster: MakeCluster = initdbCluster,
): Promise<{ dir: string; created: boolean }> {
  const version = pgliteVersion();
  const dir = templatePath(cacheDir, version);
  if (isWhole(dir, version)) return { dir, created: false };
  mkdirSync(cacheDir, { recursive: true });
  const building = join(cacheDir, `.build-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    mkdirSync(join(building, PGDATA), { recursive: true });
    await makeCluster(join(building, PGDATA));
    const { entries, bytes, sha256 } = digestTree(join(building, PGDATA));
    const manifest: Manifest = { pglite: version, entries, bytes, sha256, createdAt: new Date().toISOString() };
    writeFileSync(join(building, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
    // A damaged template of this version is replaced; a whole one (another build's) is never touched.
    if (existsSync(dir) && !isWhole(dir, version)) rmSync(dir, { recursive: true, force: true });
    try {
      renameSync(building, dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
      return { dir, created: false };
    }
    pruneCache(cacheDir, dir);
    return { dir, created: true };
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

function pruneCache(cacheDir: string, keep: string): void {
  for (const name of readdirSync(cacheDir)) {
    const path = join(cacheDir, name);
    if (path === keep) continue;
    const old = name.startsWith(".build-") && Date.now() - statSync(path).mtimeMs > STALE_BUILD_MS;
    if (name.startsWith("pglite-") || old) rmSync(path, { recursive: true, force: true });
  }
}

/** Reads every file (~40 MB). */
function isWhole(dir: string, version: string): boolean {
  const read = readManifest(dir, version);
  if (!read.ok) return false;
  try {
    return digestTree(join(dir, PGDATA)).sha256 === read.manifest.sha256;
  } catch {
    return false;
  }
}

function readManifest(dir: string, version: string): { ok: true; manifest: Manifest } | { ok: false; reason: string } {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, MANIFEST), "utf8")) as Manifest;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { ok: false, reason: code === "ENOENT" ? `no template in ${dir}` : `unreadable ${join(dir, MANIFEST)}` };
  }
  if (manifest.pglite !== version) {
    return { ok: false, reason: `${dir} was made by PGlite ${manifest.pglite}, not ${version}` };
  }
  if (typeof manifest.sha256 !== "string") return { ok: false, reason: `unreadable ${join(dir, MANIFEST)}` };
  return { ok: true, manifest };
}

/**
 * Checked against the manifest on the way; PG_VERSION goes last, so an interrupted copy is not taken for a
 * cluster. On failure the files are removed and the reason returned: the caller runs initdb.
 */
export function seedFromTemplate(
  cacheDir: string,
  dataDir: string,
): { ok: true; template: string } | { ok: false; reason: string } {
  const dir = templatePath(cacheDir);
  const read = readManifest(dir, pgliteVersion());
  if (!read.ok) return read;
  let marker: { path: string; data: Buffer; mode: number } | undefined;
  try {
    const digest = digestTree(join(dir, PGDATA), (relative, data, mode) => {
      const target = join(dataDir, relative);
      if (data === undefined) {
        mkdirSync(target, { recursive: true, mode });
      } else if (relative === CLUSTER_MARKER) {
        marker = { path: target, data, mode };
        return;
      } else {
        writeFileSync(target, data, { mode });
      }
    });
    if (digest.sha256 !== read.manifest.sha256 || digest.entries !== read.manifest.entries || !marker) {
      clearCluster(dataDir);
      return { ok: false, reason: `${dir} does not match its manifest (damaged)` };
    }
    writeFileSync(marker.path, marker.data, { mode: marker.mode });
    return { ok: true, template: dir };
  } catch (err) {
    clearCluster(dataDir);
    return { ok: false, reason: `cannot copy ${dir}: ${(err as Error).message}` };
  }
}

/** The remains of an interrupted first start; the data directory lock stays. */
export function clearCluster(dataDir: string, keep: readonly string[] = ["replay.lock"]): void {
  for (const name of readdirSync(dataDir)) {
    if (!keep.includes(name)) rmSync(join(dataDir, name), { recursive: true, force: true });
  }
}

/** In a fixed order; `visit` sees each directory (data undefined) before its contents. */
function digestTree(
  root: string,
  visit?: (relative: string, data: Buffer | undefined, mode: number) => void,
): { entries: number; bytes: number; sha256: string } {
  const hash = createHash("sha256");
  let entries = 0;
  let bytes = 0;
  const walk = (relative: string) => {
    const names = readdirSync(join(root, relative)).sort();
    for (const name of names) {
      const path = relative === "" ? name : `${relative}/${name}`;
      const stat = statSync(join(root, path));
      const mode = stat.mode & 0o777;
      entries++;
      if (stat.isDirectory()) {
        hash.update(`d ${path}\n`);
        visit?.(path, undefined, mode);
        walk(path);
      } else {
        const data = readFileSync(join(root, path));
        bytes += data.length;
        hash.update(`f ${path} ${data.length}\n`);
        hash.update(data);
        visit?.(path, data, mode);
      }
    }
  };
  walk("");
  return { entries, bytes, sha256: hash.digest("hex") };
}
