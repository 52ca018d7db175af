import type { Readable } from "node:stream";

/** What a put may be given: the bytes, or a stream of them (an archive is never held in memory whole). */
export type BlobBody = Uint8Array | AsyncIterable<Uint8Array>;

/**
 * The platform's store of large objects (replay archives): a file system directory (the embedded
 * default, or a volume in Kubernetes) or an S3 bucket, chosen by BLOB_URL. A put is all or
 * nothing: a failed or interrupted one leaves nothing under its key, and readers see either the
 * old object or the new one.
 */
export type BlobStore = {
  /** Stores `body` under `key`, replacing what was there; resolves to its size once durable. */
  put(key: string, body: BlobBody): Promise<{ sizeBytes: number }>;
  /** The object as a stream, or undefined when there is none under `key`. */
  get(key: string): Promise<Readable | undefined>;
  /** The object's size, or undefined when there is none. */
  stat(key: string): Promise<{ sizeBytes: number } | undefined>;
  /** Removes the object; removing a missing one is fine (a retried delete). */
  delete(key: string): Promise<void>;
  close(): Promise<void>;
};

const segment = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * A key is 1 to 16 `/`-separated segments of letters, digits, `.`, `_` and `-`, none starting with
 * a dot (so no `.`, `..` or hidden files), e.g. `tenant/<uuid>/replay/<uuid>.rpl`. Keys come from
 * our code, never from a client, so a bad one is a programmer error and throws.
 */
export function assertBlobKey(key: string): string {
  const parts = key.split("/");
  if (parts.length > 16 || !parts.every((part) => segment.test(part))) throw new Error(`invalid blob key ${key}`);
  return key;
}
