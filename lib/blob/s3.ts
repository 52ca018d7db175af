import { Readable } from "node:stream";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  NoSuchKey,
  NotFound,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { assertBlobKey, type BlobStore } from "./blob.js";

export type S3BlobOptions = {
  bucket: string;
  /** An S3-compatible endpoint (MinIO, a test server); unset: AWS's own for the region. */
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  /** Unset: the AWS SDK's default chain (AWS_ACCESS_KEY_ID…, a web identity token, an instance role). */
  credentials?: S3ClientConfig["credentials"];
};

/** Multipart puts: an archive is never held in memory whole, and S3 shows an object only once complete. */
export function createS3BlobStore(options: S3BlobOptions): BlobStore {
  const client = new S3Client({
    region: options.region ?? "us-east-1",
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials: options.credentials,
  });
  const Bucket = options.bucket;
  const absent = (err: unknown) => err instanceof NoSuchKey || err instanceof NotFound;

  return {
    async put(key, body) {
      const Key = assertBlobKey(key);
      const upload = new Upload({
        client,
        params: { Bucket, Key, Body: body instanceof Uint8Array ? body : Readable.from(body) },
      });
      await upload.done();
      const head = await client.send(new HeadObjectCommand({ Bucket, Key }));
      return { sizeBytes: head.ContentLength ?? 0 };
    },

    async get(key) {
      try {
        const res = await client.send(new GetObjectCommand({ Bucket, Key: assertBlobKey(key) }));
        return res.Body as Readable;
      } catch (err) {
        if (absent(err)) return undefined;
        throw err;
      }
    },

    async stat(key) {
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket, Key: assertBlobKey(key) }));
        return { sizeBytes: head.ContentLength ?? 0 };
      } catch (err) {
        if (absent(err)) return undefined;
        throw err;
      }
    },

    async delete(key) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: assertBlobKey(key) }));
    },

    async close() {
      client.destroy();
    },
  };
}
