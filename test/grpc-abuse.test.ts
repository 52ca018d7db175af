import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { afterAll, describe, expect, it } from "vitest";
import { CheckInRequestSchema, RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { grpcEnvelope, grpcPrefix, type RawGrpcAnswer, rawGrpc, rssOf } from "./raw-grpc.js";
import { sharedSystems } from "./shared-system.js";

// The gRPC abuse an internet-facing gRPC server is tested against, each written by hand
// on node:http2 against a running system: its gateway's internal port in both modes, and the
// servers service's own port in the distributed mode. Each records how long the answer took and
// the process's resident memory before and after (from its GET /metrics); docs/grpc-port.md
// has the figures.

const CHECK_IN = `/${RecorderService.typeName}/CheckIn`;
const checkIn = (serverId: string) => toBinary(CheckInRequestSchema, create(CheckInRequestSchema, { serverId }));
const MiB = 1024 * 1024;

/**
 * As many gzip members of 1 MiB of zeros each (about 1 KB compressed) as fit in `maxBytes`: a
 * valid gzip body (members may follow one another) that expands a thousandfold.
 */
function gzipBomb(maxBytes: number): Buffer {
  const member = gzipSync(Buffer.alloc(MiB), { level: 9 });
  return Buffer.concat(Array.from({ length: Math.floor(maxBytes / member.length) }, () => member));
}

/**
 * What the process may grow by while refusing one hostile call: far above what other test files
 * sharing the system move it by, far below what buffering a 4 GiB message or inflating a bomb
 * would take.
 */
const GROWTH_MAX = 256 * MiB;

type Target = { name: string; url: string };

const targets: Target[] = sharedSystems().flatMap((sys) => [
  { name: `${sys.mode}: gateway internal port`, url: sys.internalUrl },
  ...(sys.serviceUrls?.servers ? [{ name: `${sys.mode}: servers service`, url: sys.serviceUrls.servers }] : []),
]);

const figures: string[] = [];

afterAll(() => {
  // The figures docs/grpc-port.md quotes, printed with the run.
  console.log(`gRPC abuse figures (time to the status; RSS before -> after):\n${figures.join("\n")}`);
});

/** Sends one hostile call, and records its time to answer and the process's RSS around it. */
async function hostile(target: Target, what: string, call: () => Promise<RawGrpcAnswer>): Promise<RawGrpcAnswer> {
  const before = await rssOf(target.url);
  const answer = await call();
  const after = await rssOf(target.url);
  figures.push(
    `${target.name} | ${what} | grpc-status ${answer.grpcStatus} | ${answer.statusMs?.toFixed(1)} ms | ` +
      `${(before / MiB).toFixed(0)} -> ${(after / MiB).toFixed(0)} MiB`,
  );
  expect(after - before, `${what}: resident memory grew`).toBeLessThan(GROWTH_MAX);
  return answer;
}

describe.each(targets)("gRPC abuse on the $name", (target) => {
  it("a 4 GiB length prefix is resource_exhausted at once, while the request is still open, nothing buffered", async () => {
    // Only the prefix is sent and the stream left open: an answer cannot wait for the body.
    const lean = await hostile(target, "4 GiB prefix", () =>
      rawGrpc(target.url, CHECK_IN, { body: grpcPrefix(0, 0xffffffff), end: false }),
    );
    expect(lean.grpcStatus).toBe(String(Code.ResourceExhausted));
    expect(lean.trailersOnly).toBe(true);
    // Then the stream is reset with NO_ERROR: the caller is asked to stop sending, not left to.
    expect([lean.gaveUp, lean.rstCode]).toEqual([false, 0]);
    // The same, compressed, on connect-node's path.
    const compressed = await hostile(target, "4 GiB prefix, gzip", () =>
      rawGrpc(target.url, CHECK_IN, {
        headers: { "grpc-encoding": "gzip" },
        body: grpcPrefix(1, 0xffffffff),
        end: false,
      }),
    );
    expect(compressed.grpcStatus).toBe(String(Code.ResourceExhausted));
    expect([compressed.gaveUp, compressed.rstCode]).toEqual([false, 0]);
  });

  it("a length prefix longer than the body is invalid_argument when the body ends, not a hang", async () => {
    const body = Buffer.concat([grpcPrefix(0, 1000), checkIn("s-short")]);
    const lean = await hostile(target, "prefix longer than body", () => rawGrpc(target.url, CHECK_IN, { body }));
    expect(lean.grpcStatus).toBe(String(Code.InvalidArgument));
    expect(lean.grpcMessage).toContain("short of 1000 bytes");
    const zipped = gzipSync(checkIn("s-short"));
    const compressed = await hostile(target, "prefix longer than body, gzip", () =>
      rawGrpc(target.url, CHECK_IN, {
        headers: { "grpc-encoding": "gzip" },
        body: Buffer.concat([grpcPrefix(1, zipped.length + 1000), zipped]),
      }),
    );
    expect(compressed.grpcStatus).toBe(String(Code.InvalidArgument));
  });

  it("a malformed grpc-timeout is invalid_argument, naming the header", async () => {
    for (const timeout of ["1.5S", "-1S", "123456789S", "10", "1X", "99999999h"]) {
      const answer = await hostile(target, `grpc-timeout: ${timeout}`, () =>
        rawGrpc(target.url, CHECK_IN, {
          headers: { "grpc-timeout": timeout },
          body: grpcEnvelope(checkIn("s-timeout")),
        }),
      );
      expect([timeout, answer.grpcStatus]).toEqual([timeout, String(Code.InvalidArgument)]);
      expect(decodeURIComponent(answer.grpcMessage ?? "")).toContain("grpc timeout");
    }
  });

  it("a compressed flag without a grpc-encoding is invalid_argument", async () => {
    for (const headers of [{}, { "grpc-encoding": "identity" }]) {
      const answer = await hostile(target, `flag 1, ${JSON.stringify(headers)}`, () =>
        rawGrpc(target.url, CHECK_IN, { headers, body: grpcEnvelope(checkIn("s-flag"), 1) }),
      );
      expect(answer.grpcStatus).toBe(String(Code.InvalidArgument));
      expect(answer.grpcMessage).toContain("compressed without a grpc-encoding");
    }
  });

  it("a gzip bomb is resource_exhausted, inflated no further than the 4 MiB message limit", async () => {
    // 5 MiB of message in about 5 KB of gzip.
    const small = gzipSync(checkIn("a".repeat(5 * MiB)), { level: 9 });
    const refused = await hostile(target, `gzip bomb ${(small.length / 1024).toFixed(0)} KiB -> 5 MiB`, () =>
      rawGrpc(target.url, CHECK_IN, { headers: { "grpc-encoding": "gzip" }, body: grpcEnvelope(small, 1) }),
    );
    expect(refused.grpcStatus).toBe(String(Code.ResourceExhausted));
    // About 4 GB of message in the 4 MiB the limit lets in compressed.
    const bomb = gzipBomb(4 * MiB - 5);
    const big = await hostile(target, `gzip bomb ${(bomb.length / MiB).toFixed(1)} MiB -> 4 GB`, () =>
      rawGrpc(target.url, CHECK_IN, { headers: { "grpc-encoding": "gzip" }, body: grpcEnvelope(bomb, 1) }),
    );
    expect(big.grpcStatus).toBe(String(Code.ResourceExhausted));
  });
});
