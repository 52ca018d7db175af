import { fileURLToPath } from "node:url";
import type { BlobStore } from "./blob.js";
import { createFsBlobStore } from "./fs.js";

/**
 * The blob store BLOB_URL names: `file:///absolute/dir`, or
 * `s3://bucket?region=eu-west-1&endpoint=http://minio:9000&forcePathStyle=true` (credentials from
 * the AWS SDK's default chain). config.ts has checked the form.
 */
export async function openBlobStore(url: string): Promise<BlobStore> {
  const parsed = new URL(url);
  if (parsed.protocol === "file:") return createFsBlobStore(fileURLToPath(parsed));
  // Loaded only when used: the AWS SDK costs every process about a tenth of a second at start.
  const { createS3BlobStore } = await import("./s3.js");
  const query = parsed.searchParams;
  return createS3BlobStore({
    bucket: parsed.hostname,
    endpoint: query.get("endpoint") ?? undefined,
    region: query.get("region") ?? undefined,
    forcePathStyle: query.get("forcePathStyle") === "true",
  });
}
