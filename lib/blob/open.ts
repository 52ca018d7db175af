import { fileURLToPath } from "node:url";
import type { BlobStore } from "./blob.js";
import { createFsBlobStore } from "./fs.js";
import { createS3BlobStore } from "./s3.js";

/**
 * The blob store BLOB_URL names: `file:///absolute/dir`, or
 * `s3://bucket?region=eu-west-1&endpoint=http://minio:9000&forcePathStyle=true` (credentials from
 * the AWS SDK's default chain). config.ts has checked the form.
 */
export function openBlobStore(url: string): BlobStore {
  const parsed = new URL(url);
  if (parsed.protocol === "file:") return createFsBlobStore(fileURLToPath(parsed));
  const query = parsed.searchParams;
  return createS3BlobStore({
    bucket: parsed.hostname,
    endpoint: query.get("endpoint") ?? undefined,
    region: query.get("region") ?? undefined,
    forcePathStyle: query.get("forcePathStyle") === "true",
  });
}
