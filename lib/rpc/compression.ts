import type { Compression } from "@connectrpc/connect/protocol";
import { compressionGzip } from "@connectrpc/connect-node";

/**
 * What the RPC servers accept compressed: gzip, which every stock gRPC client offers (C-core's
 * `compression=Gzip`, grpc-js, connect). connect-node decompresses it with `maxOutputLength` set to
 * readMaxBytes, so a small body that would expand past the message limit stops inflating there and
 * is resource_exhausted (docs/grpc-port.md has the figures). Brotli is left out: no gRPC client
 * sends it.
 */
export const ACCEPT_COMPRESSION: Compression[] = [compressionGzip];

/** The `grpc-accept-encoding` the lean path's answers carry, as connect-node's would. */
export const GRPC_ACCEPT_ENCODING = ACCEPT_COMPRESSION.map((c) => c.name).join(",");

/**
 * The smallest answer connect-node compresses for a caller that accepts gzip. Stock gRPC clients
 * send `grpc-accept-encoding: identity,deflate,gzip` on every call whether or not they compress,
 * and connect-node answers in the first one it supports, so with its default (1 KiB) a recorder's
 * streams and compressed calls would be answered compressed, CPU spent on bytes that stay inside a
 * data centre. Our answers are pages of at most a few tens of KiB; below 64 KiB (the default
 * HTTP/2 flow-control window, what fits in one round trip) compression saves no round trip, only
 * bytes, so nothing smaller is compressed. The lean path (unary, uncompressed requests) never
 * compresses.
 */
export const COMPRESS_MIN_BYTES = 64 * 1024;
