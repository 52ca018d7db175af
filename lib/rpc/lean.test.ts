import { execFile } from "node:child_process";
import http from "node:http";
import http2 from "node:http2";
import { type AddressInfo, connect } from "node:net";
import { promisify } from "node:util";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createClient,
  type HandlerContext,
  type Transport,
} from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import {
  connectNodeAdapter,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CheckInRequest,
  CheckInRequestSchema,
  CheckInResponseSchema,
  RecorderService,
} from "../../gen/replay/servers/v1/recorder_pb.js";
import { waitFor } from "../../test/poll.js";
import { DomainError } from "../errors.js";
import { kTenant, readTrustedContext, trustedHeaders } from "./context.js";
import { contractCodeOf, errorInterceptor } from "./errors.js";
import { createLeanTransport } from "./lean-transport.js";
import { createRpcServer, type RpcServer } from "./server.js";

const run = promisify(execFile);

/**
 * One service whose handler does what the request's serverId says, and records what it saw: the
 * same handler behind the lean server and behind a stock connect-node server, so that every
 * client can be held to the same answers.
 */
type Seen = { tenant?: string; holding: string[]; aborted: string[]; calls: number };

function routes(seen: Seen) {
  return (router: ConnectRouter) => {
    router.service(RecorderService, {
      async checkIn(req: CheckInRequest, ctx: HandlerContext) {
        seen.calls++;
        seen.tenant = ctx.values.get(kTenant);
        const [verb, arg] = req.serverId.split(":");
        if (verb === "echo") {
          ctx.responseHeader.set("x-echo", ctx.requestHeader.get("x-in") ?? "none");
          ctx.responseTrailer.set("x-trailer", "t");
          return { serverId: `${req.serverId}/${req.pluginVersion}` };
        }
        if (verb === "fail")
          throw new DomainError("SERVER_NOT_FOUND", "no such server", [
            { field: "serverId", code: "INVALID_SERVER_ID", detail: "bad" },
          ]);
        if (verb === "crash") throw new Error("SELECT secret FROM internal");
        if (verb === "hold") {
          // Waits for its signal: the deadline or the caller going away must abort it.
          seen.holding.push(arg ?? "");
          await new Promise<void>((resolve) =>
            ctx.signal.addEventListener("abort", () => {
              seen.aborted.push(arg ?? "");
              resolve();
            }),
          );
          return { serverId: "late" };
        }
        return { serverId: req.serverId };
      },
    });
  };
}

async function stockServer(seen: Seen): Promise<{ url: string; close(): Promise<void> }> {
  // connect-node as a plain HTTP/1.1 server: what the lean client must interoperate with.
  const server = http.createServer(
    connectNodeAdapter({ routes: routes(seen), interceptors: [errorInterceptor], contextValues: readTrustedContext }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function outcome(call: Promise<{ serverId: string }>): Promise<{ code: Code | "ok"; value?: unknown }> {
  try {
    return { code: "ok", value: (await call).serverId };
  } catch (err) {
    const e = ConnectError.from(err);
    return { code: e.code, value: contractCodeOf(e) };
  }
}

/**
 * Calls `hold:<tag>-<ms>` with deadlines of 200 ms, then twice as long each time, until a call's
 * handler held it before its deadline expired; returns that call's tag. Every call must end with
 * the deadline's code `expired`. The doubling is for a busy machine, which can take longer than
 * 200 ms to deliver a call: it then expires in the client or before its handler runs, with no
 * handler whose signal the deadline should abort. It weakens nothing: a server that enforces no
 * deadline still leaves the handler that did hold a call holding it, never aborted.
 */
async function expireWhileHeld<C>(
  seen: Seen,
  tag: string,
  call: (serverId: string, deadlineMs: number) => Promise<C>,
  expired: C,
): Promise<string> {
  for (let deadlineMs = 200; ; deadlineMs *= 2) {
    const attempt = `${tag}-${deadlineMs}`;
    expect(await call(`hold:${attempt}`, deadlineMs)).toBe(expired);
    if (seen.holding.includes(attempt) || deadlineMs >= 12_800) return attempt;
  }
}

describe("the lean internal hop", () => {
  const seen: Seen = { holding: [], aborted: [], calls: 0 };
  let lean: RpcServer;
  beforeAll(async () => {
    lean = await createRpcServer({ name: "lean-test", port: 0, routes: routes(seen) });
  });
  afterAll(() => lean.close(0));

  const clients: [string, (url: string) => Transport][] = [
    ["the lean client (Connect, binary, HTTP/1.1)", (baseUrl) => createLeanTransport({ baseUrl })],
    [
      "connect-node Connect binary over HTTP/2",
      (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true }),
    ],
    ["connect-node Connect JSON over HTTP/1.1", (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "1.1" })],
    ["connect-node gRPC", (baseUrl) => createGrpcTransport({ baseUrl })],
    [
      "connect-node gRPC-Web (binary, served by the lean path)",
      (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "2" }),
    ],
  ];

  for (const [name, transport] of clients) {
    describe(name, () => {
      it("gets answers, headers, trailers and the trusted context through", async () => {
        const client = createClient(RecorderService, transport(lean.url));
        let header: Headers | undefined;
        let trailer: Headers | undefined;
        const tenant = "7d4b8a52-54a2-4c44-a6f3-0cf0d2ffb0f6";
        const res = await client.checkIn(
          { serverId: "echo", pluginVersion: "1.2.3" },
          {
            headers: { "x-in": "hello", ...trustedHeaders({ tenantId: tenant }) },
            onHeader: (h) => (header = h),
            onTrailer: (t) => (trailer = t),
          },
        );
        expect(res.serverId).toBe("echo/1.2.3");
        expect(header?.get("x-echo")).toBe("hello");
        expect(trailer?.get("x-trailer")).toBe("t");
        expect(seen.tenant).toBe(tenant);
      });

      it("gets a DomainError as its code with the contract code and violations as details", async () => {
        const client = createClient(RecorderService, transport(lean.url));
        expect(await outcome(client.checkIn({ serverId: "fail" }))).toEqual({
          code: Code.NotFound,
          value: {
            code: "SERVER_NOT_FOUND",
            violations: [{ field: "serverId", code: "INVALID_SERVER_ID", detail: "bad" }],
          },
        });
        const crash = await client.checkIn({ serverId: "crash" }).catch((e) => ConnectError.from(e));
        expect(crash).toBeInstanceOf(ConnectError);
        expect((crash as ConnectError).code).toBe(Code.Internal);
        expect((crash as ConnectError).rawMessage).not.toContain("SELECT");
      });

      it("has a deadline that expires: deadline_exceeded, and the handler's signal is aborted", async () => {
        const client = createClient(RecorderService, transport(lean.url));
        const tag = await expireWhileHeld(
          seen,
          `${name}-deadline`,
          async (serverId, timeoutMs) => (await outcome(client.checkIn({ serverId }, { timeoutMs }))).code,
          Code.DeadlineExceeded,
        );
        await waitFor("the handler aborted", () => seen.aborted.includes(tag));
      });

      it("cancels: the handler's signal is aborted when the caller goes away", async () => {
        const client = createClient(RecorderService, transport(lean.url));
        const tag = `${name}-cancel`;
        const controller = new AbortController();
        const call = outcome(client.checkIn({ serverId: `hold:${tag}` }, { signal: controller.signal }));
        // The caller goes away once the handler holds the call, not after a guess at how long that takes.
        await waitFor("the handler holding the call", () => seen.holding.includes(tag));
        controller.abort();
        expect((await call).code).toBe(Code.Canceled);
        await waitFor("the handler aborted", () => seen.aborted.includes(tag));
      });
    });
  }

  it("a stock @grpc/grpc-js client gets answers, errors with details, and deadlines", async () => {
    const client = new grpc.Client(new URL(lean.url).host, grpc.credentials.createInsecure());
    const call = (serverId: string, deadlineMs: number) =>
      new Promise<{ code: number; serverId?: string; metadata?: grpc.Metadata }>((resolve) => {
        client.makeUnaryRequest(
          `/${RecorderService.typeName}/CheckIn`,
          (m: CheckInRequest) => Buffer.from(toBinary(CheckInRequestSchema, m)),
          (bytes: Buffer) => fromBinary(CheckInResponseSchema, bytes),
          create(CheckInRequestSchema, { serverId }),
          new grpc.Metadata(),
          { deadline: Date.now() + deadlineMs },
          (err, res) =>
            resolve(err ? { code: err.code, metadata: err.metadata } : { code: 0, serverId: res?.serverId }),
        );
      });
    try {
      // Deadlines that only bound a hang; the one this test is about is expireWhileHeld's.
      expect(await call("plain", 30_000)).toEqual({ code: 0, serverId: "plain" });
      const failed = await call("fail", 30_000);
      expect(failed.code).toBe(grpc.status.NOT_FOUND);
      const trailer = new Headers();
      for (const [k, v] of Object.entries(failed.metadata?.toHttp2Headers() ?? {})) {
        trailer.set(k, Buffer.isBuffer(v) ? v.toString("base64") : String(v));
      }
      trailer.set("grpc-status", "5");
      const error = findTrailerError(trailer);
      expect(error && contractCodeOf(error)?.code).toBe("SERVER_NOT_FOUND");
      const tag = await expireWhileHeld(
        seen,
        "grpc-js",
        async (serverId, deadlineMs) => (await call(serverId, deadlineMs)).code,
        grpc.status.DEADLINE_EXCEEDED,
      );
      await waitFor("the handler aborted", () => seen.aborted.includes(tag));
    } finally {
      client.close();
    }
  });

  it("buf curl reaches it in the gRPC, Connect and gRPC-Web protocols, errors with details included", async () => {
    // buf curl sends no deadline (grpc-timeout and connect-timeout-ms are reserved to it); the
    // clients above cover deadlines and cancellation.
    const curl = (protocol: string, serverId: string) =>
      run(
        "npx",
        [
          "buf",
          "curl",
          "--protocol",
          protocol,
          "--http2-prior-knowledge",
          "--schema",
          "proto",
          "--data",
          JSON.stringify({ serverId }),
          `${lean.url}/${RecorderService.typeName}/CheckIn`,
        ],
        { timeout: 30_000 },
      ).then(
        ({ stdout }) => ({ ok: JSON.parse(stdout) }),
        (err: { code?: number; stderr?: string }) => ({ exit: err.code, error: JSON.parse(err.stderr ?? "") }),
      );
    for (const protocol of ["grpc", "connect", "grpcweb"]) {
      expect(await curl(protocol, protocol)).toEqual({ ok: { serverId: protocol } });
      const failed = await curl(protocol, "fail");
      expect(failed).toMatchObject({
        error: { code: "not_found", message: "no such server", details: [{ type: "replay.common.v1.ErrorDetail" }] },
      });
    }
  });

  it("answers bytes that are not the method's input as invalid_argument, in Connect, gRPC-Web and gRPC", async () => {
    const path = `/${RecorderService.typeName}/CheckIn`;
    const connect = await fetch(`${lean.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/proto" },
      body: Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
    });
    expect(connect.status).toBe(400);
    expect(await connect.json()).toMatchObject({ code: "invalid_argument" });
    const json = await fetch(`${lean.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(json.status).toBe(400);
    const web = await fetch(`${lean.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto" },
      body: Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]),
    });
    expect(web.status).toBe(200);
    expect(Buffer.from(await web.arrayBuffer()).toString("latin1")).toContain("grpc-status: 3\r\n");

    const session = http2.connect(lean.url);
    try {
      const grpcStatus = (frame: Buffer) =>
        new Promise<string | undefined>((resolve) => {
          const stream = session.request({
            ":method": "POST",
            ":path": path,
            "content-type": "application/grpc",
            te: "trailers",
          });
          let status: string | undefined;
          stream.on("response", (h) => (status ??= h["grpc-status"] as string | undefined));
          stream.on("trailers", (t) => (status ??= t["grpc-status"] as string | undefined));
          stream.on("close", () => resolve(status));
          stream.resume();
          stream.end(frame);
        });
      // Garbage protobuf, a frame flagged compressed without grpc-encoding, a cut-short frame.
      expect(await grpcStatus(Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]))).toBe("3");
      expect(await grpcStatus(Buffer.from([1, 0, 0, 0, 1, 0x0a]))).toBe("3");
      expect(await grpcStatus(Buffer.from([0, 0, 0, 0, 9, 0x0a]))).toBe("3");
    } finally {
      session.close();
    }
  });

  describe("the lean client against a stock connect-node server", () => {
    const stockSeen: Seen = { holding: [], aborted: [], calls: 0 };
    let stock: { url: string; close(): Promise<void> };
    beforeAll(async () => {
      stock = await stockServer(stockSeen);
    });
    afterAll(() => stock.close());

    it("gets answers, headers and trailers, errors with details, and expiring deadlines", async () => {
      const client = createClient(RecorderService, createLeanTransport({ baseUrl: stock.url }));
      let header: Headers | undefined;
      let trailer: Headers | undefined;
      const res = await client.checkIn(
        { serverId: "echo", pluginVersion: "9" },
        { headers: { "x-in": "hi" }, onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) },
      );
      expect(res.serverId).toBe("echo/9");
      expect(header?.get("x-echo")).toBe("hi");
      expect(trailer?.get("x-trailer")).toBe("t");
      expect((await outcome(client.checkIn({ serverId: "fail" }))).value).toMatchObject({ code: "SERVER_NOT_FOUND" });
      const tag = await expireWhileHeld(
        stockSeen,
        "stock",
        async (serverId, timeoutMs) => (await outcome(client.checkIn({ serverId }, { timeoutMs }))).code,
        Code.DeadlineExceeded,
      );
      await waitFor("the stock handler aborted", () => stockSeen.aborted.includes(tag));
    });

    it("answers an unreachable backend as unavailable", async () => {
      const client = createClient(RecorderService, createLeanTransport({ baseUrl: "http://127.0.0.1:1" }));
      expect((await outcome(client.checkIn({ serverId: "x" }))).code).toBe(Code.Unavailable);
    });
  });

  it("drains on close: calls in flight on HTTP/1.1 and HTTP/2 finish, new connections are refused", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    const server = await createRpcServer({
      name: "drain-test",
      port: 0,
      routes(router) {
        router.service(RecorderService, {
          async checkIn(req) {
            started++;
            await gate;
            return { serverId: req.serverId };
          },
        });
      },
    });
    const h1 = createClient(RecorderService, createLeanTransport({ baseUrl: server.url }));
    const h2 = createClient(RecorderService, createConnectTransport({ baseUrl: server.url, httpVersion: "2" }));
    const calls = [h1.checkIn({ serverId: "one" }), h2.checkIn({ serverId: "two" })];
    await waitFor("both calls started", () => started === 2);
    // The grace bounds a drain that hangs; a busy machine may take seconds to finish the calls.
    const closed = server.close(30_000);
    // Released once the drain is under way (the port refuses new connections), so a drain that
    // wrongly cut the calls has done it by then; they must finish however long the drain takes.
    await waitFor("the server to stop accepting", () => refusesConnections(server.url));
    release();
    expect((await Promise.all(calls)).map((r) => r.serverId)).toEqual(["one", "two"]);
    await closed;
    const after = createClient(RecorderService, createLeanTransport({ baseUrl: server.url }));
    expect((await outcome(after.checkIn({ serverId: "three" }))).code).toBe(Code.Unavailable);
  });
});

describe("a handler's plain answer on the lean path", () => {
  it("is a message to interceptors, which may read it or answer another in its place", async () => {
    const seenByInterceptor: unknown[] = [];
    const server = await createRpcServer({
      name: "interceptor-test",
      port: 0,
      interceptors: [
        (next) => async (req) => {
          const res = await next(req);
          if (res.stream) return res;
          seenByInterceptor.push(res.message);
          const serverId = (res.message as unknown as { serverId: string }).serverId;
          if (serverId !== "replace") return res;
          return { ...res, message: create(CheckInResponseSchema, { serverId: "replaced", status: 1 }) };
        },
      ],
      routes(router) {
        router.service(RecorderService, { checkIn: async (req) => ({ serverId: req.serverId }) });
      },
    });
    try {
      const client = createClient(RecorderService, createLeanTransport({ baseUrl: server.url }));
      expect((await client.checkIn({ serverId: "plain" })).serverId).toBe("plain");
      expect(await client.checkIn({ serverId: "replace" })).toMatchObject({ serverId: "replaced", status: 1 });
      expect(seenByInterceptor).toEqual([
        create(CheckInResponseSchema, { serverId: "plain" }),
        create(CheckInResponseSchema, { serverId: "replace" }),
      ]);
    } finally {
      await server.close(0);
    }
  });
});

/** Own getters and setters: each is a new closure per call, which V8 keeps in the old generation. */
function ownAccessors(value: object): string[] {
  return Object.entries(Object.getOwnPropertyDescriptors(value))
    .filter(([, d]) => d.get !== undefined || d.set !== undefined)
    .map(([name]) => name);
}

describe("the lean path's per-call objects", () => {
  // An object literal's getter pins the whole call through every young collection (unary-call.ts,
  // LazyResponse): the RPC server's young collections took many times longer (docs/performance.md).
  it("have no own accessors, on the server and in the client, and still read lazily", async () => {
    const seen: { request: string[]; response: string[]; header?: string | null; aborted?: boolean } = {
      request: [],
      response: [],
    };
    const server = await createRpcServer({
      name: "accessor-test",
      port: 0,
      interceptors: [
        (next) => async (req) => {
          seen.request = ownAccessors(req);
          seen.header = req.header.get("x-in");
          seen.aborted = req.signal.aborted;
          const res = await next(req);
          seen.response = ownAccessors(res);
          res.header.set("x-out", "o");
          return res;
        },
      ],
      routes(router) {
        router.service(RecorderService, { checkIn: async (req) => ({ serverId: req.serverId }) });
      },
    });
    try {
      const transport = createLeanTransport({ baseUrl: server.url });
      const res = await transport.unary(
        RecorderService.method.checkIn,
        undefined,
        undefined,
        { "x-in": "i" },
        {
          serverId: "a",
        },
      );
      expect(seen).toEqual({ request: [], response: [], header: "i", aborted: false });
      expect(ownAccessors(res)).toEqual([]);
      expect(res.header.get("x-out")).toBe("o");
      expect(res.message.serverId).toBe("a");
      await transport.close();
    } finally {
      await server.close(0);
    }
  });
});

/** Whether a new TCP connection to the URL's port is refused (its listener is closed). */
function refusesConnections(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}
