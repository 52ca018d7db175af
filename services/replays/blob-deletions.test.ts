import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BlobStore } from "../../lib/blob/blob.js";
import { createFsBlobStore } from "../../lib/blob/fs.js";
import { type TestDb, testDbModes } from "../../lib/db/_testing.js";
import { startWorker } from "../../lib/worker/worker.js";
import { waitFor } from "../../test/poll.js";
import { insertBlobDeletion, updateBlobDeletionsClaimed } from "./archive-store.js";
import { blobDeletionsWorker, retryDelayMs } from "./blob-deletions.js";

// The archive removal queue (no orphan archive for ever): the worker removes a queued
// archive from a real blob store and drops the queue row only once the store confirmed; a store
// that fails leaves the row queued, counted and due later.

describe("retryDelayMs", () => {
  it("doubles from the base per failed attempt, up to the maximum", () => {
    const retry = { baseMs: 1_000, maxMs: 60_000 };
    expect([0, 1, 2, 5, 6, 40, 10_000].map((n) => retryDelayMs(n, retry))).toEqual([
      1_000, 2_000, 4_000, 32_000, 60_000, 60_000, 60_000,
    ]);
  });
});

describe.each(testDbModes())("blob deletions ($name database)", ({ open }) => {
  let testDb: TestDb;
  let dir: string;
  beforeAll(async () => {
    testDb = await open("replays");
    dir = await mkdtemp(join(tmpdir(), "replay-blob-deletions-"));
  });
  afterAll(async () => {
    await testDb[Symbol.asyncDispose]();
    await rm(dir, { recursive: true, force: true });
  });

  const queue = async (key: string) => {
    await testDb.db.query("INSERT INTO replays.blob_deletion (archive_key) VALUES ($1)", [key]);
  };
  const queued = async (key: string) => {
    const { rows } = await testDb.db.query<{ attempts: number; due_in_ms: number }>(
      `SELECT attempts, (extract(epoch FROM next_attempt_at - now()) * 1000)::float8 AS due_in_ms
         FROM replays.blob_deletion WHERE archive_key = $1`,
      [key],
    );
    return rows[0];
  };
  const signal = new AbortController().signal;

  it("removes a queued archive from the blob store, then its queue row; a missing archive is done too", async () => {
    const blobs = createFsBlobStore(join(dir, "store"));
    const present = `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`;
    const missing = `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`;
    await blobs.put(present, new TextEncoder().encode("archive bytes"));
    await queue(present);
    await queue(missing);

    const worker = blobDeletionsWorker({ db: testDb.db, blobs, batchSize: 10 });
    expect(await worker.round(signal)).toBe(false);
    expect(await blobs.stat(present)).toBeUndefined();
    expect(await queued(present)).toBeUndefined();
    expect(await queued(missing)).toBeUndefined();
  });

  it("leaves the key queued when the store fails, with a growing delay, and removes it once the store works", async () => {
    // A real file system store whose root is a file: every removal fails (ENOTDIR).
    const brokenRoot = join(dir, `broken-${randomUUID()}`);
    await writeFile(brokenRoot, "not a directory");
    const broken = createFsBlobStore(brokenRoot);
    const key = `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`;
    await queue(key);
    const retry = { baseMs: 60_000, maxMs: 600_000 };

    const failing = blobDeletionsWorker({ db: testDb.db, blobs: broken, retry });
    await failing.round(signal);
    const first = await queued(key);
    expect(first?.attempts).toBe(1);
    expect(first?.due_in_ms).toBeGreaterThan(50_000);
    // Not due yet: a round leaves it alone.
    await failing.round(signal);
    expect((await queued(key))?.attempts).toBe(1);

    await testDb.db.query("UPDATE replays.blob_deletion SET next_attempt_at = now() WHERE archive_key = $1", [key]);
    await failing.round(signal);
    const second = await queued(key);
    expect(second?.attempts).toBe(2);
    expect(second?.due_in_ms).toBeGreaterThan(110_000);

    const blobs = createFsBlobStore(join(dir, "store"));
    await blobs.put(key, new TextEncoder().encode("archive bytes"));
    await testDb.db.query("UPDATE replays.blob_deletion SET next_attempt_at = now() WHERE archive_key = $1", [key]);
    await blobDeletionsWorker({ db: testDb.db, blobs }).round(signal);
    expect(await queued(key)).toBeUndefined();
    expect(await blobs.stat(key)).toBeUndefined();
  });

  it("never hands one key to two replicas working at once", async () => {
    const store = createFsBlobStore(join(dir, "store"));
    const removed: string[] = [];
    // The real store, recording which keys each removal was asked for.
    const blobs: BlobStore = {
      ...store,
      async delete(key) {
        removed.push(key);
        await store.delete(key);
      },
    };
    const keys = Array.from({ length: 30 }, () => `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`);
    for (const key of keys) await queue(key);
    const replicas = Array.from({ length: 3 }, () => blobDeletionsWorker({ db: testDb.db, blobs, batchSize: 30 }));
    await Promise.all(replicas.map((replica) => replica.round(signal)));
    // A replica that found every row locked by another has nothing left to do on its next round.
    await Promise.all(replicas.map((replica) => replica.round(signal)));
    expect([...removed].sort()).toEqual([...keys].sort());
    for (const key of keys) expect(await queued(key)).toBeUndefined();
  });

  it("leaves a key claimed by a replica that died alone until its lease runs out, then removes it", async () => {
    const blobs = createFsBlobStore(join(dir, "store"));
    const key = `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`;
    await blobs.put(key, new TextEncoder().encode("archive bytes"));
    await queue(key);
    // A replica claims the key and dies before removing it.
    expect((await updateBlobDeletionsClaimed(testDb.db, 100, 60_000)).map((r) => r.archive_key)).toContain(key);
    const worker = blobDeletionsWorker({ db: testDb.db, blobs });
    await worker.round(signal);
    expect(await blobs.stat(key)).toBeDefined();
    expect((await queued(key))?.attempts).toBe(0);

    await testDb.db.query("UPDATE replays.blob_deletion SET next_attempt_at = now() WHERE archive_key = $1", [key]);
    await worker.round(signal);
    expect(await blobs.stat(key)).toBeUndefined();
    expect(await queued(key)).toBeUndefined();
  });

  it("wakes on the commit of a queued key rather than waiting for its poll", async () => {
    const blobs = createFsBlobStore(join(dir, "store"));
    const [first, key] = [1, 2].map(() => `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`) as [string, string];
    await blobs.put(key, new TextEncoder().encode("archive bytes"));
    await queue(first);
    await using _worker = startWorker(blobDeletionsWorker({ db: testDb.db, blobs, intervalMs: 600_000 }));
    // The first round, which runs once the worker listens, takes `first`; the next waits 10 minutes
    // unless a NOTIFY wakes it.
    await waitFor("the first blob dequeued", async () => (await queued(first)) === undefined);
    await testDb.db.transaction((tx) => insertBlobDeletion(tx, key));
    await waitFor(
      "the blob deleted and dequeued",
      async () => (await blobs.stat(key)) === undefined && (await queued(key)) === undefined,
    );
  });

  it("works a full batch and asks for another round at once", async () => {
    const blobs = createFsBlobStore(join(dir, "store"));
    const keys = Array.from({ length: 5 }, () => `tenant/${randomUUID()}/replay/${randomUUID()}.rpl`);
    for (const key of keys) await queue(key);
    const worker = blobDeletionsWorker({ db: testDb.db, blobs, batchSize: 3 });
    expect(await worker.round(signal)).toBe(true);
    expect(await worker.round(signal)).toBe(false);
    for (const key of keys) expect(await queued(key)).toBeUndefined();
  });
});
