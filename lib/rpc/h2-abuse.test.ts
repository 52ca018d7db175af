import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { CheckInRequestSchema, RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import {
  ERROR,
  FLAG,
  FRAME,
  frame,
  grpcDataFrame,
  grpcRequestHeaders,
  headerBlock,
  headersFrames,
  RawH2Client,
  rstStreamFrame,
  SETTING,
} from "../../test/h2-frames.js";
import { pollUntil } from "../../test/poll.js";
import { H2_LIMITS } from "./h2-limits.js";
import { createHealthService } from "./health.js";
import { createRpcServer, type RpcServer } from "./server.js";

// The HTTP/2 abuse an internet-facing gRPC server is tested against, on an RpcServer of our own
// (every internal port is one): raw frames where node:http2's client would not misbehave.

const CHECK_IN = `/${RecorderService.typeName}/CheckIn`;
const HEALTH_CHECK = "/grpc.health.v1.Health/Check";
const checkInBody = toBinary(CheckInRequestSchema, create(CheckInRequestSchema, { serverId: "s-1" }));

type Harness = {
  server: RpcServer;
  calls: number;
  /** Calls whose handler saw its signal abort. */
  aborted: number;
  hold: boolean;
  release(): void;
};

async function startServer(): Promise<Harness> {
  let releaseAll: () => void = () => {};
  let gate = new Promise<void>((resolve) => (releaseAll = resolve));
  const h = {
    calls: 0,
    aborted: 0,
    hold: false,
    release() {
      releaseAll();
      gate = new Promise<void>((resolve) => (releaseAll = resolve));
    },
  } as Harness;
  h.server = await createRpcServer({
    name: "h2-abuse",
    port: 0,
    routes(router) {
      router.service(RecorderService, {
        async checkIn(req, ctx) {
          h.calls++;
          if (h.hold) {
            const aborted = new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
            if ((await Promise.race([gate.then(() => "released"), aborted.then(() => "aborted")])) === "aborted") {
              h.aborted++;
            }
          }
          return { serverId: req.serverId };
        },
      });
      router.service(
        Health,
        createHealthService([RecorderService.typeName], async () => true),
      );
    },
  });
  return h;
}

/**
 * A Health check on a connection of its own: the server still serves others while attacked. Not
 * timed: what an attack cost is shown by what it got (calls run, bytes taken), which a busy machine
 * does not change; the deadline is only for a server that no longer answers at all.
 */
async function expectServing(url: string): Promise<void> {
  const health = createClient(Health, createGrpcTransport({ baseUrl: url }));
  expect((await health.check({ service: "" }, { timeoutMs: 30_000 })).status).toBe(1);
}

function streamIds(count: number): number[] {
  return Array.from({ length: count }, (_, i) => 1 + 2 * i);
}

describe("HTTP/2 limits of an internal port", () => {
  let h: Harness;
  const port = () => h.server.port;
  beforeAll(async () => {
    h = await startServer();
  });
  afterAll(() => h.server.close(0));

  it("advertises its stream limit and header list size in its first SETTINGS frame", async () => {
    const client = await RawH2Client.connect(port());
    try {
      const settings = await client.serverSettings();
      expect(settings.get(SETTING.MAX_CONCURRENT_STREAMS)).toBe(H2_LIMITS.maxConcurrentStreams);
      expect(settings.get(SETTING.MAX_HEADER_LIST_SIZE)).toBe(H2_LIMITS.maxHeaderListSize);
    } finally {
      client.close();
    }
  });

  it("answers a header block over the limit with RST_STREAM(ENHANCE_YOUR_CALM) at once, and keeps the connection", async () => {
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      const before = h.calls;
      // Two fields of 12 KiB: each fine for HPACK, together over the advertised 16 KiB.
      const big = { "x-a": "a".repeat(12 * 1024), "x-b": "b".repeat(12 * 1024) };
      await client.write(Buffer.concat([headersFrames(1, grpcRequestHeaders(CHECK_IN, big), false)]));
      // "At once" is the kind of answer, not a time (a busy machine makes any answer slow): the
      // header list check resets this one stream as its headers are read and keeps the connection;
      // without it the call would run (h.calls) or nothing would come for stream 1 until a guard
      // cut the whole connection (GOAWAY).
      const reset = await client.waitFor((f) => f.streamId === 1 && f.type === FRAME.RST_STREAM, 30_000);
      expect(reset?.payload.readUInt32BE(0)).toBe(ERROR.ENHANCE_YOUR_CALM);
      expect(client.frames.some((f) => f.type === FRAME.GOAWAY)).toBe(false);
      expect(h.calls).toBe(before);
      // The same connection still serves a call.
      await client.write(
        Buffer.concat([headersFrames(3, grpcRequestHeaders(CHECK_IN), false), grpcDataFrame(3, checkInBody)]),
      );
      const answered = await client.waitFor((f) => f.streamId === 3 && f.type === FRAME.HEADERS, 30_000);
      expect(answered).toBeDefined();
      expect(h.calls).toBe(before + 1);
    } finally {
      client.close();
    }
  });

  it("closes a connection whose header field is too large for HPACK, instead of leaving the caller hanging", async () => {
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      await client.write(headersFrames(1, grpcRequestHeaders(CHECK_IN, { "x-big": "a".repeat(70_000) }), false));
      // nghttp2 answers GOAWAY(COMPRESSION_ERROR) and stops reading; before the fix the socket
      // stayed open for good, and C-core waited for its deadline.
      expect(await client.waitClosed(H2_LIMITS.wedgeTimeoutMs + 30_000)).toBe(true);
      expect(client.goaway()?.code).toBe(ERROR.COMPRESSION_ERROR);
    } finally {
      client.close();
    }
  });

  it("enforces its stream limit: a client past it is cut, and no handler past the limit runs", async () => {
    h.hold = true;
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      const before = h.calls;
      const ids = streamIds(H2_LIMITS.maxConcurrentStreams + 20);
      await client.write(
        Buffer.concat(
          ids.map((id) =>
            Buffer.concat([headersFrames(id, grpcRequestHeaders(CHECK_IN), false), grpcDataFrame(id, checkInBody)]),
          ),
        ),
      );
      // Once its SETTINGS is acknowledged, nghttp2 takes a stream past the limit as a connection
      // error (RFC 9113 §5.1.2 allows it): GOAWAY, and the held calls' signals abort. C-core and
      // grpc-js never get here: they queue calls behind the advertised limit.
      expect(await client.waitClosed(30_000)).toBe(true);
      expect(client.goaway()?.lastStreamId).toBeLessThanOrEqual(2 * H2_LIMITS.maxConcurrentStreams);
      expect(h.calls - before).toBeLessThanOrEqual(H2_LIMITS.maxConcurrentStreams);
    } finally {
      h.hold = false;
      h.release();
      client.close();
    }
  });

  it("queues a well-behaved client's calls past the stream limit, and serves them all", async () => {
    h.hold = true;
    try {
      const recorder = createClient(RecorderService, createGrpcTransport({ baseUrl: h.server.url }));
      const before = h.calls;
      const count = H2_LIMITS.maxConcurrentStreams + 50;
      const calls = Array.from({ length: count }, (_, i) => recorder.checkIn({ serverId: `s-${i}` }));
      await pollUntil(
        async () => h.calls - before,
        (n) => n >= H2_LIMITS.maxConcurrentStreams,
        30_000,
      );
      expect(h.calls - before).toBe(H2_LIMITS.maxConcurrentStreams);
      h.release();
      h.hold = false;
      expect(await Promise.all(calls)).toHaveLength(count);
    } finally {
      h.hold = false;
      h.release();
    }
  });

  it("aborts a running call's signal when its stream is reset", async () => {
    h.hold = true;
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      const before = { calls: h.calls, aborted: h.aborted };
      await client.write(
        Buffer.concat([headersFrames(1, grpcRequestHeaders(CHECK_IN), false), grpcDataFrame(1, checkInBody)]),
      );
      await pollUntil(
        async () => h.calls,
        (n) => n > before.calls,
        30_000,
      );
      await client.write(rstStreamFrame(1, ERROR.CANCEL));
      await pollUntil(
        async () => h.aborted,
        (n) => n > before.aborted,
        30_000,
      );
    } finally {
      h.hold = false;
      h.release();
      client.close();
    }
  });

  for (const [name, code] of [
    ["CANCEL", ERROR.CANCEL],
    ["NO_ERROR", ERROR.NO_ERROR],
  ] as const) {
    it(`cuts a rapid reset with ${name} (HEADERS+DATA+RST_STREAM), runs next to none of its calls, and stays responsive`, async () => {
      const count = 2_000;
      // Each call takes a while, as a real one does (the gateway's Health check calls four
      // services and the database): the resets arrive while the calls run.
      h.hold = true;
      const before = { calls: h.calls, aborted: h.aborted };
      const rssBefore = process.memoryUsage().rss;
      const client = await RawH2Client.connect(port());
      try {
        await client.serverSettings();
        const attack = Buffer.concat(
          streamIds(count).map((id) =>
            Buffer.concat([
              headersFrames(id, grpcRequestHeaders(CHECK_IN), false),
              grpcDataFrame(id, checkInBody),
              rstStreamFrame(id, code),
            ]),
          ),
        );
        // In slices, as a client on a network would send it: the guard acts between reads.
        for (let offset = 0; offset < attack.length && !client.closed; offset += 64 * 1024) {
          await client.write(attack.subarray(offset, offset + 64 * 1024));
        }
        const health = expectServing(h.server.url);
        expect(await client.waitClosed(30_000)).toBe(true);
        expect(client.goaway()?.code).toBe(ERROR.ENHANCE_YOUR_CALM);
        // Before: every one of the 2 000 calls ran. Now the session is cut after a burst of early
        // resets (a call whose stream is already reset when its body is read does not run).
        expect(h.calls - before.calls).toBeLessThan(2 * H2_LIMITS.earlyResetBurst);
        // And the calls that had begun saw their signal abort.
        await pollUntil(
          async () => h.aborted - before.aborted,
          (n) => n === h.calls - before.calls,
          30_000,
        );
        await health;
        expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
      } finally {
        h.hold = false;
        h.release();
        client.close();
      }
    });
  }

  it("cuts a CONTINUATION flood (HEADERS without END_HEADERS, then CONTINUATION without end)", async () => {
    const rssBefore = process.memoryUsage().rss;
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      await client.write(frame(FRAME.HEADERS, 0, 1, headerBlock(grpcRequestHeaders(CHECK_IN))));
      // Each CONTINUATION adds a distinct 8 KiB header field (literal, not indexed).
      let sent = 0;
      for (let i = 0; i < 10_000 && !client.closed; i++) {
        const block = headerBlock({ [`x-flood-${i}`]: "f".repeat(8 * 1024) });
        await client.write(frame(FRAME.CONTINUATION, 0, 1, block));
        sent += block.length;
      }
      expect(await client.waitClosed(30_000)).toBe(true);
      // Cut within the first megabyte (the header list limit), not after 80 MB.
      expect(sent).toBeLessThan(8 * 1024 * 1024);
      expect(client.frames.some((f) => f.type === FRAME.GOAWAY || f.type === FRAME.RST_STREAM)).toBe(true);
      expect(process.memoryUsage().rss - rssBefore).toBeLessThan(100 * 1024 * 1024);
      await expectServing(h.server.url);
    } finally {
      client.close();
    }
  });

  it("is not fooled by a flood of empty CONTINUATION frames either", async () => {
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      await client.write(frame(FRAME.HEADERS, 0, 1, headerBlock(grpcRequestHeaders(CHECK_IN))));
      const empties = Buffer.concat(Array.from({ length: 1_000 }, () => frame(FRAME.CONTINUATION, 0, 1)));
      for (let i = 0; i < 1_000 && !client.closed; i++) await client.write(empties);
      expect(await client.waitClosed(30_000)).toBe(true);
      expect(client.frames.some((f) => f.type === FRAME.GOAWAY)).toBe(true);
    } finally {
      client.close();
    }
  });

  it("serves a client that honours the end of headers as usual (control for the floods)", async () => {
    const client = await RawH2Client.connect(port());
    try {
      await client.serverSettings();
      await client.write(
        Buffer.concat([
          frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, headerBlock(grpcRequestHeaders(HEALTH_CHECK))),
          grpcDataFrame(1, new Uint8Array()),
        ]),
      );
      expect(await client.waitFor((f) => f.streamId === 1 && f.type === FRAME.HEADERS, 30_000)).toBeDefined();
    } finally {
      client.close();
    }
  });
});
