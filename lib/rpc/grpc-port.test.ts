import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckRequestSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import {
  CheckInRequestSchema,
  CheckInResponseSchema,
  RecorderService,
} from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import { grpcEnvelope, grpcPrefix, rawGrpc } from "../../test/raw-grpc.js";
import { createLeanTransport } from "./lean-transport.js";
import { createRpcServer, type RpcServer } from "./server.js";

const CHECK_IN = `/${RecorderService.typeName}/CheckIn`;
const checkIn = (serverId: string) => toBinary(CheckInRequestSchema, create(CheckInRequestSchema, { serverId }));
/** A check-in whose serverId is `size` bytes of "a": gzip makes it a few KB. */
const inflating = (size: number) => gzipSync(checkIn("a".repeat(size)), { level: 9 });

/**
 * As many gzip members of 1 MiB of zeros each (about 1 KB compressed) as fit in `maxBytes`: a
 * valid gzip body (members may follow one another) that expands a thousandfold.
 */
function gzipBomb(maxBytes: number): Buffer {
  const member = gzipSync(Buffer.alloc(1024 * 1024), { level: 9 });
  return Buffer.concat(Array.from({ length: Math.floor(maxBytes / member.length) }, () => member));
}

/** A stock grpc-js check-in; `compress` sends it gzip-compressed (grpc.default_compression_algorithm). */
function grpcJsCheckIn(url: string, serverId: string, compress: boolean) {
  const options = compress ? { "grpc.default_compression_algorithm": 2 } : {};
  const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure(), options);
  return new Promise<{ code: number; details?: string; serverId?: string }>((resolve) => {
    client.makeUnaryRequest(
      CHECK_IN,
      (m: ReturnType<typeof create<typeof CheckInRequestSchema>>) => Buffer.from(toBinary(CheckInRequestSchema, m)),
      (bytes: Buffer) => fromBinary(CheckInResponseSchema, bytes),
      create(CheckInRequestSchema, { serverId }),
      new grpc.Metadata(),
      { deadline: Date.now() + 10_000 },
      (err, res) => {
        client.close();
        resolve(err ? { code: err.code, details: err.details } : { code: 0, serverId: res?.serverId });
      },
    );
  });
}

describe("what an RPC port accepts", () => {
  let server: RpcServer;
  /** The request headers of every call, as handlers see them. */
  const seen: Headers[] = [];
  beforeAll(async () => {
    server = await createRpcServer({
      name: "grpc-port-test",
      port: 0,
      isReady: async () => true,
      interceptors: [
        (next) => async (req) => {
          seen.push(req.header);
          return next(req);
        },
      ],
      routes(router) {
        router.service(RecorderService, { checkIn: async (req) => ({ serverId: req.serverId }) });
        router.service(ServersService, {});
      },
    });
  });
  afterAll(() => server.close(0));

  describe("gzip", () => {
    it("is accepted from a stock gRPC client, and every gRPC answer says so in grpc-accept-encoding", async () => {
      expect(await grpcJsCheckIn(server.url, "s-gzip", true)).toEqual({ code: 0, serverId: "s-gzip" });
      const compressed = gzipSync(checkIn("s-raw"));
      const raw = await rawGrpc(server.url, CHECK_IN, {
        headers: { "grpc-encoding": "gzip" },
        body: grpcEnvelope(compressed, 1),
      });
      expect(raw.grpcStatus).toBe("0");
      // An uncompressed call, served on the lean path, tells the client it may compress the next.
      const plain = await rawGrpc(server.url, CHECK_IN, { body: grpcEnvelope(checkIn("s-plain")) });
      expect(plain.grpcStatus).toBe("0");
      expect(plain.headers["grpc-accept-encoding"]).toBe("gzip");
    });

    it("is accepted in the Connect protocol (Content-Encoding: gzip)", async () => {
      const client = createClient(
        RecorderService,
        createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", sendCompression: compressionGzip }),
      );
      expect((await client.checkIn({ serverId: "c-gzip".padEnd(2000, "x") })).serverId).toHaveLength(2000);
    });

    it("that expands past the 4 MiB message limit is resource_exhausted, inflated no further than the limit", async () => {
      // 5 MiB of message in about 5 KB of gzip: a small body past the limit.
      const small = inflating(5 * 1024 * 1024);
      expect(small.length).toBeLessThan(16 * 1024);
      const refused = await rawGrpc(server.url, CHECK_IN, {
        headers: { "grpc-encoding": "gzip" },
        body: grpcEnvelope(small, 1),
      });
      expect(refused.grpcStatus).toBe(String(Code.ResourceExhausted));
      expect(decodeURIComponent(refused.grpcMessage ?? "")).toContain("after decompression");

      // 4 GB of message in 4 MiB of gzip, the most the limit lets in compressed: inflating it all
      // would take this process past 4 GB. It stops at the limit.
      const bomb = gzipBomb(4 * 1024 * 1024 - 5);
      const before = process.memoryUsage().rss;
      const answered = await rawGrpc(server.url, CHECK_IN, {
        headers: { "grpc-encoding": "gzip" },
        body: grpcEnvelope(bomb, 1),
      });
      expect(answered.grpcStatus).toBe(String(Code.ResourceExhausted));
      expect(process.memoryUsage().rss - before).toBeLessThan(256 * 1024 * 1024);

      const connect = await fetch(`${server.url}${CHECK_IN}`, {
        method: "POST",
        headers: { "content-type": "application/proto", "content-encoding": "gzip" },
        body: small,
      });
      expect(await connect.json()).toMatchObject({ code: "resource_exhausted" });
    });
  });

  it("gzip is never asked for, nor sent, by the gateway's hop (the lean transport), unary or streaming", async () => {
    const transport = createLeanTransport({ baseUrl: server.url });
    seen.length = 0;
    expect((await createClient(RecorderService, transport).checkIn({ serverId: "s-hop" })).serverId).toBe("s-hop");
    for await (const update of createClient(Health, transport).watch({ service: "" })) {
      expect(update.status).toBe(1);
      break;
    }
    await transport.close();
    expect(seen).toHaveLength(2);
    for (const header of seen) {
      const named = [...header.entries()].filter(([name]) => name.includes("encoding"));
      expect(named.filter(([, value]) => value.includes("gzip"))).toEqual([]);
    }
  });

  describe("an unknown method", () => {
    for (const path of ["/replay.nope.v1.NopeService/Call", `/${RecorderService.typeName}/Nope`]) {
      it(`is UNIMPLEMENTED with HTTP 200 in gRPC and gRPC-Web, and 404 in Connect: ${path}`, async () => {
        const raw = await rawGrpc(server.url, path, { body: grpcEnvelope(new Uint8Array(0)) });
        expect(raw.status).toBe(200);
        expect(raw.trailersOnly).toBe(true);
        expect(raw.grpcStatus).toBe(String(Code.Unimplemented));
        expect(raw.grpcMessage).toContain(path);
        // A caller still sending is answered, and its stream ended, without waiting for its body.
        const open = await rawGrpc(server.url, path, { body: grpcPrefix(0, 1000), end: false });
        expect([open.grpcStatus, open.gaveUp]).toEqual([String(Code.Unimplemented), false]);

        const web = await fetch(`${server.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/grpc-web+proto" },
          body: grpcEnvelope(new Uint8Array(0)),
        });
        expect(web.status).toBe(200);
        expect(web.headers.get("grpc-status")).toBe(String(Code.Unimplemented));
        expect((await web.arrayBuffer()).byteLength).toBe(0);

        const connect = await fetch(`${server.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/proto" },
          body: new Uint8Array(0),
        });
        expect(connect.status).toBe(404);
      });
    }

    it("is UNIMPLEMENTED to a stock grpc-js client, with our message rather than an HTTP status", async () => {
      const client = new grpc.Client(new URL(server.url).host, grpc.credentials.createInsecure());
      const answer = await new Promise<grpc.ServiceError | null>((resolve) =>
        client.makeUnaryRequest(
          "/replay.nope.v1.NopeService/Call",
          (m: Buffer) => m,
          (b: Buffer) => b,
          Buffer.alloc(0),
          (err) => resolve(err),
        ),
      );
      client.close();
      expect(answer?.code).toBe(grpc.status.UNIMPLEMENTED);
      expect(answer?.details).toContain("no method");
    });
  });

  it("serves grpc.health.v1 knowing every service registered on the port, and no other", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
    for (const service of ["", RecorderService.typeName, ServersService.typeName, Health.typeName]) {
      expect((await health.check({ service })).status, service).toBe(1);
    }
    await expect(health.check({ service: MarkersService.typeName })).rejects.toMatchObject({ code: Code.NotFound });
    expect(Object.keys((await health.list({})).statuses).sort()).toEqual(
      ["", Health.typeName, RecorderService.typeName, ServersService.typeName].sort(),
    );
  });

  describe("deadlines", () => {
    it("takes one longer than a timer holds (99999999H, 9999999999 ms) as no deadline, on both paths", async () => {
      const grpcHealth = createClient(Health, createGrpcTransport({ baseUrl: server.url }));
      const connectHealth = createClient(Health, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
      // Watch is a stream, served by connect-node; Check is unary, served on the lean path.
      for (const [client, headers] of [
        [grpcHealth, { "grpc-timeout": "99999999H" }],
        [connectHealth, { "connect-timeout-ms": "9999999999" }],
      ] as const) {
        for await (const update of client.watch({ service: "" }, { headers })) {
          expect(update.status).toBe(1);
          break;
        }
        expect((await client.check({ service: "" }, { headers })).status).toBe(1);
      }
      const compressed = await rawGrpc(server.url, CHECK_IN, {
        headers: { "grpc-encoding": "gzip", "grpc-timeout": "99999999H" },
        body: grpcEnvelope(gzipSync(checkIn("s-long")), 1),
      });
      expect(compressed.grpcStatus).toBe("0");
    });

    it("refuses a malformed grpc-timeout as invalid_argument, on the lean path and connect-node's", async () => {
      const watch = `/${Health.typeName}/Watch`;
      const request = grpcEnvelope(toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema)));
      for (const timeout of ["1.5S", "-1S", "123456789S", "10", "1X", "S", "1 S", ""]) {
        const lean = await rawGrpc(server.url, CHECK_IN, {
          headers: { "grpc-timeout": timeout },
          body: grpcEnvelope(checkIn("s-1")),
        });
        expect([timeout, lean.grpcStatus, lean.grpcMessage]).toEqual([
          timeout,
          String(Code.InvalidArgument),
          expect.stringContaining("timeout"),
        ]);
        const stream = await rawGrpc(server.url, watch, { headers: { "grpc-timeout": timeout }, body: request });
        expect([timeout, stream.grpcStatus]).toEqual([timeout, String(Code.InvalidArgument)]);
      }
    });
  });

  it("refuses a Connect JSON body that is not UTF-8 as invalid_argument, on the lean path and connect-node's", async () => {
    const notUtf8 = Buffer.concat([Buffer.from('{"serverId":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const lean = await fetch(`${server.url}${CHECK_IN}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: notUtf8,
    });
    expect(lean.status).toBe(400);
    expect(await lean.json()).toMatchObject({ code: "invalid_argument" });
    const compressed = await fetch(`${server.url}${CHECK_IN}`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: gzipSync(notUtf8),
    });
    expect(compressed.status).toBe(400);
    expect(await compressed.json()).toMatchObject({ code: "invalid_argument" });
    // The same body in UTF-8 is served.
    const fine = await fetch(`${server.url}${CHECK_IN}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"serverId":"a\u00ff"}',
    });
    expect(await fine.json()).toEqual({ serverId: "a\u00ff" });
  });
});
