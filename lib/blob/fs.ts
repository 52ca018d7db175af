import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { assertBlobKey, type BlobBody, type BlobStore } from "./blob.js";

/** Temporary file, fsync, rename: never a partial object under a key, and old readers keep the old file. */
export function createFsBlobStore(root: string): BlobStore {
  const tmp = join(root, ".tmp");
  const pathOf = (key: string) => join(root, ...assertBlobKey(key).split("/"));
  const missing = (err: unknown) => (err as NodeJS.ErrnoException).code === "ENOENT";

  return {
    async put(key, body) {
      const path = pathOf(key);
      await mkdir(tmp, { recursive: true });
      await mkdir(dirname(path), { recursive: true });
      const temp = join(tmp, `${randomBytes(8).toString("hex")}.part`);
      const out = createWriteStream(temp, { flags: "wx", mode: 0o600 });
      try {
        await pipeline(source(body), out);
        const handle = await open(temp, "r+");
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
        await rename(temp, path);
      } catch (err) {
        // A body that fails at once can fail the pipeline before the stream's file is even open:
        // the file appears when it opens, so remove it only once the stream has closed.
        if (!out.closed) await new Promise<void>((resolve) => out.once("close", () => resolve()));
        await rm(temp, { force: true });
        throw err;
      }
      return { sizeBytes: (await stat(path)).size };
    },

    async get(key) {
      try {
        const handle = await open(pathOf(key), "r");
        return handle.createReadStream();
      } catch (err) {
        if (missing(err)) return undefined;
        throw err;
      }
    },

    async stat(key) {
      try {
        return { sizeBytes: (await stat(pathOf(key))).size };
      } catch (err) {
        if (missing(err)) return undefined;
        throw err;
      }
    },

    async delete(key) {
      await rm(pathOf(key), { force: true });
    },

    close: async () => {},
  };
}

function source(body: BlobBody): Readable {
  return body instanceof Uint8Array ? Readable.from([body]) : Readable.from(body);
}
