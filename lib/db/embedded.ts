import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { PGlite, type Transaction } from "@electric-sql/pglite";
import { logger } from "../log.js";
import { runHook } from "./db.js";
import { CLUSTER_MARKER, clearCluster, seedFromTemplate } from "./embedded-template.js";
import type { Db, QueryResult, TransactionOptions, Tx } from "./types.js";
import { assertSchemaName } from "./types.js";

const log = logger("lib:db:embedded");

/**
 * PGlite in this process, shared by the five services (a Db per schema). It is one connection: a transaction
 * holds it until it ends, so a pool query inside a transaction waits for the transaction itself.
 */
export type EmbeddedPostgres = {
  pglite: PGlite;
  close(): Promise<void>;
  /** Synchronous, for the process's exit: the database dies with the process, so should its lock. */
  releaseAtExit(): void;
};

export type EmbeddedOptions = {
  /** In memory only: a dumped cluster (a migrated test template) instead of a fresh one. */
  from?: Blob;
  /** On disk only: without a usable template there, initdb runs in this process. */
  template?: string;
};

export async function openEmbeddedPostgres(
  dataDir: string | undefined,
  options: EmbeddedOptions = {},
): Promise<EmbeddedPostgres> {
  let lock = { release() {} };
  let pglite: PGlite;
  if (dataDir === undefined) {
    pglite = await ready(new PGlite({ loadDataDir: options.from ?? (await freshClusterDump()) }));
  } else {
    mkdirSync(dataDir, { recursive: true });
    lock = lockDataDir(dataDir);
    try {
      pglite = await openOnDisk(dataDir, options.template);
    } catch (err) {
      lock.release();
      throw err;
    }
  }
  let closed = false;
  return {
    pglite,
    async close() {
      if (closed) return;
      closed = true;
      await pglite.close();
      lock.release();
    },
    releaseAtExit: () => lock.release(),
  };
}

/** Remains of a first start that died before the cluster was whole (no PG_VERSION) are cleared first. */
async function openOnDisk(dataDir: string, template: string | undefined): Promise<PGlite> {
  if (existsSync(join(dataDir, CLUSTER_MARKER))) return ready(new PGlite(dataDir));
  const began = performance.now();
  clearCluster(dataDir);
  let reason = "no template configured (EMBEDDED_TEMPLATE_DIR=off)";
  if (template !== undefined) {
    const seeded = seedFromTemplate(template, dataDir);
    if (seeded.ok) {
      try {
        const pglite = await ready(new PGlite(dataDir));
        log.info(
          { dataDir, template: seeded.template, ms: Math.round(performance.now() - began) },
          "embedded database created from the template",
        );
        return pglite;
      } catch (err) {
        reason = `the copy of ${seeded.template} did not start: ${(err as Error).message}`;
        clearCluster(dataDir);
      }
    } else {
      reason = seeded.reason;
    }
  }
  const pglite = await ready(new PGlite(dataDir));
  const level = template === undefined ? "info" : "warn";
  log[level]({ dataDir, reason, ms: Math.round(performance.now() - began) }, "embedded database created by initdb");
  return pglite;
}

async function ready(pglite: PGlite): Promise<PGlite> {
  try {
    await pglite.waitReady;
    return pglite;
  } catch (err) {
    await pglite.close().catch(() => {});
    throw err;
  }
}

// Later in-memory instances (the tests' databases) load this dump instead of running initdb each.
let freshCluster: Promise<Blob> | undefined;

function freshClusterDump(): Promise<Blob> {
  freshCluster ??= (async () => {
    const first = new PGlite();
    try {
      await first.waitReady;
      return await first.dumpDataDir("none");
    } finally {
      await first.close();
    }
  })();
  return freshCluster;
}

/**
 * PGlite lets a second process open the same files, and two writers lose data silently. A lock whose
 * process is gone is taken over; `release` removes it only while it is still ours.
 */
function lockDataDir(dataDir: string): { release(): void } {
  const path = join(dataDir, "replay.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          try {
            if (readFileSync(path, "utf8") === String(process.pid)) rmSync(path, { force: true });
          } catch {
            // Already gone.
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = Number(readFileSync(path, "utf8"));
      if (isAlive(owner)) {
        throw new Error(
          `the embedded database in ${dataDir} is in use by process ${owner}; stop it or set another DATA_DIR`,
        );
      }
      rmSync(path, { force: true });
    }
  }
  throw new Error(`could not lock ${path}`);
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function createEmbeddedDb(embedded: EmbeddedPostgres, schema: string): Db {
  assertSchemaName(schema);
  const { pglite } = embedded;
  const toResult = <R>(res: { rows: unknown[]; affectedRows?: number }): QueryResult<R> => ({
    rows: res.rows as R[],
    rowCount: res.affectedRows || res.rows.length,
  });
  return {
    schema,
    async query<R>(text: string, params?: readonly unknown[]) {
      return toResult<R>(await pglite.query(text, params as unknown[] | undefined));
    },
    async transaction<T>(fn: (tx: Tx) => Promise<T>, options?: TransactionOptions): Promise<T> {
      const afterCommit: (() => void)[] = [];
      const result = await pglite.transaction(async (inner: Transaction) => {
        const tx: Tx = {
          async query<R>(text: string, params?: readonly unknown[]) {
            return toResult<R>(await inner.query(text, params as unknown[] | undefined));
          },
          onCommit: (hook) => afterCommit.push(hook),
          async exec(sql) {
            await inner.exec(sql);
          },
          trace: options?.trace,
        };
        return fn(tx);
      });
      for (const hook of afterCommit) runHook(hook);
      return result;
    },
    async listen(channel, onNotify) {
      const unsubscribe = await pglite.listen(assertSchemaName(channel), onNotify);
      return async () => {
        try {
          await unsubscribe();
        } catch (err) {
          log.debug({ err }, "unlisten after close");
        }
      };
    },
    // The instance is shared; openEmbeddedPostgres' owner closes it.
    close: async () => {},
  };
}
