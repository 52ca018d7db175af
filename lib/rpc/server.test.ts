import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import {
  CheckInRequestSchema,
  CheckInResponseSchema,
  RecorderService,
} from "../../gen/replay/servers/v1/recorder_pb.js";
import { createHealthService } from "./health.js";
import { internalTokenHeaders, internalTokenInterceptor } from "./internal-token.js";
import { createLeanTransport } from "./lean-transport.js";
import { createRpcServer, type RpcServer } from "./server.js";

const TOKEN = "t".repeat(40);

type Harness = { server: RpcServer; calls: number; release(): void; hold: boolean };

async function startServer(...acceptedTokens: string[]): Promise<Harness> {
  let releaseAll: () => void = () => {};
  let gate = new Promise<void>((resolve) => (releaseAll = resolve));
  const harness = {
    calls: 0,
    hold: false,
    release() {
      releaseAll();
      gate = new Promise<void>((resolve) => (releaseAll = resolve));
    },
  } as Harness;
  harness.server = await createRpcServer({
    name: "test",
    port: 0,
    acceptedTokens,
    routes(router) {
      router.service(RecorderService, {
        async checkIn(req) {
          harness.calls++;
          if (harness.hold) await gate;
          return { serverId: req.serverId };
        },
      });
      router.service(
        Health,
        createHealthService([RecorderService.typeName], async () => true),
      );
    },
  });
  return harness;
}

function grpcCheckIn(url: string, metadata: Record<string, string>): Promise<{ code: number; serverId?: string }> {
  const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      `/${RecorderService.typeName}/CheckIn`,
      (m: ReturnType<typeof create<typeof CheckInRequestSchema>>) => Buffer.from(toBinary(CheckInRequestSchema, m)),
      (bytes: Buffer) => fromBinary(CheckInResponseSchema, bytes),
      create(CheckInRequestSchema, { serverId: "s-1" }),
      md,
      { deadline: Date.now() + 5000 },
      (err, res) => {
        client.close();
        resolve(err ? { code: err.code } : { code: 0, serverId: res?.serverId });
      },
    );
  });
}

async function codeOf(call: Promise<unknown>): Promise<Code | "ok"> {
  try {
    await call;
    return "ok";
  } catch (err) {
    return ConnectError.from(err).code;
  }
}

describe("the internal token (INTERNAL_TOKEN)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startServer(TOKEN);
  });
  afterAll(() => h.server.close(0));

  const transports: [string, (url: string, token?: string) => Transport][] = [
    [
      "Connect",
      (baseUrl, token) =>
        createConnectTransport({
          baseUrl,
          httpVersion: "2",
          interceptors: token ? [internalTokenInterceptor(token)] : [],
        }),
    ],
    [
      "lean Connect (HTTP/1.1)",
      (baseUrl, token) => createLeanTransport({ baseUrl, headers: internalTokenHeaders(token) }),
    ],
    [
      "gRPC",
      (baseUrl, token) =>
        createGrpcTransport({ baseUrl, interceptors: token ? [internalTokenInterceptor(token)] : [] }),
    ],
    [
      "gRPC-Web",
      (baseUrl, token) =>
        createGrpcWebTransport({
          baseUrl,
          httpVersion: "2",
          interceptors: token ? [internalTokenInterceptor(token)] : [],
        }),
    ],
  ];

  for (const [protocol, transport] of transports) {
    it(`refuses a ${protocol} call without the token, or with another, before any handler runs`, async () => {
      const before = h.calls;
      const without = createClient(RecorderService, transport(h.server.url));
      expect(await codeOf(without.checkIn({ serverId: "s-1" }))).toBe(Code.Unauthenticated);
      const wrong = createClient(RecorderService, transport(h.server.url, `${TOKEN.slice(1)}x`));
      expect(await codeOf(wrong.checkIn({ serverId: "s-1" }))).toBe(Code.Unauthenticated);
      const shorter = createClient(RecorderService, transport(h.server.url, TOKEN.slice(1)));
      expect(await codeOf(shorter.checkIn({ serverId: "s-1" }))).toBe(Code.Unauthenticated);
      expect(h.calls).toBe(before);

      const right = createClient(RecorderService, transport(h.server.url, TOKEN));
      expect((await right.checkIn({ serverId: "s-1" })).serverId).toBe("s-1");
      expect(h.calls).toBe(before + 1);
    });
  }

  it("refuses a stock grpc-js call without the token as status 16, and serves it with the token", async () => {
    const before = h.calls;
    expect((await grpcCheckIn(h.server.url, {})).code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await grpcCheckIn(h.server.url, { authorization: "Bearer nope" })).code).toBe(grpc.status.UNAUTHENTICATED);
    expect(h.calls).toBe(before);
    expect(await grpcCheckIn(h.server.url, { authorization: `Bearer ${TOKEN}` })).toEqual({ code: 0, serverId: "s-1" });
  });

  it("leaves grpc.health.v1 open, for probes that cannot send headers", async () => {
    const health = createClient(Health, transports[2]?.[1](h.server.url) as Transport);
    expect((await health.check({ service: "" })).status).toBe(1);
  });
});

describe("rotating the internal token (INTERNAL_TOKEN_ACCEPTED)", () => {
  const NEXT = "n".repeat(40);
  let h: Harness;
  beforeAll(async () => {
    h = await startServer(TOKEN, NEXT);
  });
  afterAll(() => h.server.close());

  it("lets in the token and the one also accepted, and nothing else", async () => {
    expect(await grpcCheckIn(h.server.url, { authorization: `Bearer ${TOKEN}` })).toEqual({ code: 0, serverId: "s-1" });
    expect(await grpcCheckIn(h.server.url, { authorization: `Bearer ${NEXT}` })).toEqual({ code: 0, serverId: "s-1" });
    const before = h.calls;
    for (const other of [`${NEXT.slice(1)}x`, TOKEN.slice(1), `${TOKEN}${NEXT}`]) {
      expect((await grpcCheckIn(h.server.url, { authorization: `Bearer ${other}` })).code).toBe(
        grpc.status.UNAUTHENTICATED,
      );
    }
    expect(h.calls).toBe(before);
  });
});

describe("the RPC server without a token (loopback)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startServer();
  });
  afterAll(() => h.server.close(0));

  it("serves calls as before", async () => {
    expect(await grpcCheckIn(h.server.url, {})).toEqual({ code: 0, serverId: "s-1" });
  });

  it("holds many calls in flight without a MaxListenersExceededWarning", async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      h.hold = true;
      const client = createClient(RecorderService, createConnectTransport({ baseUrl: h.server.url, httpVersion: "2" }));
      const before = h.calls;
      const calls = Array.from({ length: 40 }, (_, i) => client.checkIn({ serverId: `s-${i}` }));
      while (h.calls < before + 40) await new Promise((resolve) => setTimeout(resolve, 10));
      h.release();
      expect((await Promise.all(calls)).map((r) => r.serverId)).toHaveLength(40);
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      h.hold = false;
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning")).toEqual([]);
  });
});
