import type { Compression } from "@connectrpc/connect/protocol";
import { compressionGzip } from "@connectrpc/connect-node";

/** Every stock gRPC client offers gzip, none brotli; inflating stops at readMaxBytes (docs/grpc-port.md). */
export const ACCEPT_COMPRESSION: Compression[] = [compressionGzip];

export const GRPC_ACCEPT_ENCODING = ACCEPT_COMPRESSION.map((c) => c.name).join(",");

/**
 * Stock gRPC clients accept gzip on every call, so with connect-node's 1 KiB default their answers would be
 * compressed; below 64 KiB (one HTTP/2 window) compression saves no round trip, only bytes.
 */
export const COMPRESS_MIN_BYTES = 64 * 1024;
