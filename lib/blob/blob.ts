import type { Readable } from "node:stream";

/** An archive is never held in memory whole. */
export type BlobBody = Uint8Array | AsyncIterable<Uint8Array>;

/** A put is all or nothing: a failed one leaves nothing, and readers see the old object or the new one. */
export type BlobStore = {
  /** Resolves once durable. */
  put(key: string, body: BlobBody): Promise<{ sizeBytes: number }>;
  get(key: string): Promise<Readable | undefined>;
  stat(key: string): Promise<{ sizeBytes: number } | undefined>;
  /** Removing a missing one is fine (a retried delete). */
  delete(key: string): Promise<void>;
  close(): Promise<void>;
};

const segment = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** No segment starts with a dot (no `..`). Keys come from our code, never a client, so a bad one throws. */
export function assertBlobKey(key: string): string {
  const parts = key.split("/");
  if (parts.length > 16 || !parts.every((part) => segment.test(part))) throw new Error(`invalid blob key ${key}`);
  return key;
}
