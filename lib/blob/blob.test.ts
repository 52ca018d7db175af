import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBlobKey, type BlobStore } from "./blob.js";
import { createFsBlobStore } from "./fs.js";
import { openBlobStore } from "./open.js";
import { createS3BlobStore } from "./s3.js";

async function bytesOf(stream: Readable | undefined): Promise<Buffer> {
  if (!stream) throw new Error("no object");
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

/** `count` chunks of 1 MiB of random bytes, streamed; its hash to compare with what comes back. */
function stream(count: number, failAfter?: number) {
  const hash = createHash("sha256");
  async function* chunks() {
    for (let i = 0; i < count; i++) {
      if (failAfter !== undefined && i === failAfter) throw new Error("the recorder went away");
      const chunk = randomBytes(1024 * 1024);
      hash.update(chunk);
      yield chunk;
    }
  }
  return { body: chunks(), digest: () => hash.digest("hex") };
}

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
const key = () => `tenant/${randomBytes(8).toString("hex")}/replay/${randomBytes(8).toString("hex")}.rpl`;

function describeBlobContract(name: string, open: () => BlobStore) {
  describe(`${name} blob store`, () => {
    it("streams a multi-MiB put back byte for byte, and reports its size", async () => {
      const blobs = open();
      const k = key();
      const source = stream(6);
      expect(await blobs.put(k, source.body)).toEqual({ sizeBytes: 6 * 1024 * 1024 });
      expect(sha256(await bytesOf(await blobs.get(k)))).toBe(source.digest());
      expect(await blobs.stat(k)).toEqual({ sizeBytes: 6 * 1024 * 1024 });
    });

    it("replaces an object on a second put, and takes plain bytes", async () => {
      const blobs = open();
      const k = key();
      await blobs.put(k, Buffer.from("first"));
      await blobs.put(k, Buffer.from("second, longer"));
      expect((await bytesOf(await blobs.get(k))).toString()).toBe("second, longer");
      expect(await blobs.stat(k)).toEqual({ sizeBytes: 14 });
    });

    it("answers undefined for a missing key, and deletes idempotently", async () => {
      const blobs = open();
      const k = key();
      expect(await blobs.get(k)).toBeUndefined();
      expect(await blobs.stat(k)).toBeUndefined();
      await blobs.put(k, Buffer.from("x"));
      await blobs.delete(k);
      await blobs.delete(k);
      expect(await blobs.get(k)).toBeUndefined();
    });

    it("leaves nothing under the key when the source stream fails mid-way", async () => {
      const blobs = open();
      const k = key();
      // S3 may answer with the multipart abort's own error rather than the source's.
      await expect(blobs.put(k, stream(8, 6).body)).rejects.toThrow();
      expect(await blobs.stat(k)).toBeUndefined();
      // And an object already there survives a failed replacement whole.
      await blobs.put(k, Buffer.from("kept"));
      await expect(blobs.put(k, stream(8, 6).body)).rejects.toThrow();
      expect((await bytesOf(await blobs.get(k))).toString()).toBe("kept");
    });
  });
}

let fsRoot: string;
let s3Dir: string;
let s3: S3rver;
let endpoint: string;
beforeAll(async () => {
  fsRoot = await mkdtemp(join(tmpdir(), "blobs-fs-"));
  s3Dir = await mkdtemp(join(tmpdir(), "blobs-s3-"));
  s3 = new S3rver({
    address: "127.0.0.1",
    port: 0,
    silent: true,
    directory: s3Dir,
    configureBuckets: [{ name: "replays", configs: [] }],
  });
  const address = (await s3.run()) as AddressInfo;
  endpoint = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  await s3?.close();
  await rm(fsRoot, { recursive: true, force: true });
  await rm(s3Dir, { recursive: true, force: true });
});

describeBlobContract("file system", () => createFsBlobStore(fsRoot));
describeBlobContract("S3 (s3rver)", () =>
  createS3BlobStore({
    bucket: "replays",
    endpoint,
    forcePathStyle: true,
    // s3rver's fixed test credentials.
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  }),
);

describe("blob keys and BLOB_URL", () => {
  it.each(["tenant/a/replay/b.rpl", "a", "a-b_c.d/e"])("accepts %s", (k) => expect(assertBlobKey(k)).toBe(k));

  it.each(["", "/abs", "a//b", "../etc/passwd", "a/../../b", ".hidden", "a/.", "a b", "a\\\\b", `${"a/".repeat(16)}a`])(
    "refuses %j, which could escape the root or hide",
    (k) => expect(() => assertBlobKey(k)).toThrow(/invalid blob key/),
  );

  it("leaves no temporary file behind after a failed put on the file system", async () => {
    const blobs = createFsBlobStore(fsRoot);
    await expect(blobs.put(key(), stream(3, 1).body)).rejects.toThrow();
    expect(await readdir(join(fsRoot, ".tmp"))).toEqual([]);
  });

  it("opens the adapter BLOB_URL names", async () => {
    const viaUrl = await openBlobStore(`file://${fsRoot}`);
    const k = key();
    await viaUrl.put(k, Buffer.from("through the url"));
    expect((await bytesOf(await createFsBlobStore(fsRoot).get(k))).toString()).toBe("through the url");
  });
});
