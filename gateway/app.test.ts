import type { IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { waitFor } from "../test/poll.js";
import { buildApp, type GatewayDeps } from "./app.js";
import type { Authenticator } from "./auth/authenticate.js";
import { createRateLimiter } from "./rate-limit.js";

describe("the gateway while it drains", () => {
  it("answers requests still arriving on an open connection with a 503 problem and closes it", async () => {
    let release: (missing: string[]) => void = () => {};
    let parked: () => void = () => {};
    const inFlight = new Promise<void>((resolve) => (parked = resolve));
    const app = buildApp({
      routes: [],
      // /readyz touches neither: the request parked on it holds the connection open while closing.
      authenticator: {} as Authenticator,
      db: {} as never,
      rateLimiter: createRateLimiter({ replicas: 1 }),
      notReady: () =>
        new Promise<string[]>((resolve) => {
          release = resolve;
          parked();
        }),
      now: () => Date.now(),
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const { port } = app.server.address() as { port: number };
    const socket = connect({ host: "127.0.0.1", port });
    await new Promise((resolve) => socket.once("connect", resolve));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    // The first request is in flight when the close begins; the second arrives during the drain.
    socket.write("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
    await inFlight;
    const closing = app.close();
    while (app.server.listening) await new Promise((resolve) => setTimeout(resolve, 5));
    // The first request is released once the server has the second, not after a guess at how long
    // that takes: released first, it would let the connection go idle and close unanswered.
    const arrived = new Promise<void>((resolve) =>
      app.server.on("request", (req: IncomingMessage) => {
        if (req.headers["x-request-id"] === "drain-1") resolve();
      }),
    );
    socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: drain-1\r\n\r\n");
    await arrived;
    release([]);
    await closing;
    await closed;
    const answers = Buffer.concat(chunks)
      .toString()
      .split(/(?=HTTP\/1\.1 )/);
    expect(answers).toHaveLength(2);
    expect(answers[0]).toMatch(/^HTTP\/1\.1 200/);
    const drained = answers[1] as string;
    expect(drained).toMatch(/^HTTP\/1\.1 503/);
    expect(drained).toMatch(/content-type: application\/problem\+json/i);
    expect(drained).toMatch(/x-request-id: drain-1/i);
    expect(drained).toMatch(/connection: close/i);
    const body = JSON.parse(drained.slice(drained.indexOf("\r\n\r\n") + 4));
    expect(body).toMatchObject({ status: 503, code: "SERVICE_UNAVAILABLE", instance: "drain-1" });
  });
});

/** A gateway with no routes on a loopback port, its connection limits shortened for the test. */
async function listening(deps: Partial<GatewayDeps> = {}) {
  const app = buildApp({
    routes: [],
    authenticator: {} as Authenticator,
    db: {} as never,
    rateLimiter: createRateLimiter({ replicas: 1 }),
    notReady: async () => [],
    now: () => Date.now(),
    ...deps,
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  const { port } = app.server.address() as { port: number };
  return { app, port, url: `http://127.0.0.1:${port}` };
}

async function connected(port: number): Promise<Socket> {
  const socket = connect({ host: "127.0.0.1", port });
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("connect", resolve));
  return socket;
}

function openConnections(app: { server: { getConnections(cb: (err: Error | null, n: number) => void): void } }) {
  return new Promise<number>((resolve) => app.server.getConnections((_err, n) => resolve(n)));
}

describe("the public port's connection limits", () => {
  it("cuts a request whose body trickles in, with a 400 problem, once the request timeout passes", async () => {
    const { app, port } = await listening({
      limits: { headersTimeoutMs: 1000, requestTimeoutMs: 1000, checkIntervalMs: 100 },
    });
    try {
      const socket = await connected(port);
      const chunks: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      let closed = false;
      socket.on("close", () => (closed = true));
      // A GET body is read (and held to 64 KiB) before routing: 64 KiB announced, a byte every 100 ms.
      socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n");
      const trickle = setInterval(() => socket.writable && socket.write("a"), 100);
      try {
        // Before the fix nothing bounded it: the connection stayed open as long as bytes came.
        await waitFor("the socket closed", () => closed);
      } finally {
        clearInterval(trickle);
      }
      const answer = Buffer.concat(chunks).toString();
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toMatch(/content-type: application\/problem\+json/i);
      expect(answer).toMatch(/x-request-id: /i);
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({
        code: "INVALID_ARGUMENT",
        detail: "the request did not arrive in time",
      });
    } finally {
      await app.close();
    }
  });

  it("cuts a connection that pipelines the docs script three times and never reads", async () => {
    const { app, port } = await listening({ limits: { stallTimeoutMs: 1000 } });
    try {
      const socket = await connected(port);
      socket.pause();
      socket.write("GET /docs/js/scalar.js HTTP/1.1\r\nHost: x\r\n\r\n".repeat(3));
      await waitFor("one open connection", async () => (await openConnections(app)) === 1);
      // Before the fix no timeout applied: the three answers waited in memory for ever.
      await waitFor("no open connection", async () => (await openConnections(app)) === 0);
      socket.destroy();
    } finally {
      await app.close();
    }
  });

  it("serves the docs script compressed, with an ETag that answers 304", async () => {
    const { app, url } = await listening();
    try {
      const plain = await fetch(`${url}/docs/js/scalar.js`, { headers: { "accept-encoding": "identity" } });
      const script = Buffer.from(await plain.arrayBuffer());
      expect(plain.headers.get("content-encoding")).toBeNull();
      expect(script.length).toBeGreaterThan(1_000_000);
      const etag = plain.headers.get("etag") as string;
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(plain.headers.get("cache-control")).toBe("public, no-cache");
      expect(plain.headers.get("vary")).toMatch(/accept-encoding/i);
      // fetch would undo the encoding: a raw request sees the gzip bytes as sent.
      const gzipped = await rawGet(url, "/docs/js/scalar.js", ["Accept-Encoding: gzip"]);
      expect(gzipped.head).toMatch(/content-encoding: gzip/i);
      expect(gunzipSync(gzipped.body).equals(script)).toBe(true);
      expect(gzipped.body.length).toBeLessThan(script.length / 2);
      const brotli = await fetch(`${url}/docs/js/scalar.js`, { headers: { "accept-encoding": "br, gzip" } });
      expect(brotli.headers.get("content-encoding")).toBe("br");
      expect(Buffer.from(await brotli.arrayBuffer()).equals(script)).toBe(true);
      const again = await fetch(`${url}/docs/js/scalar.js`, { headers: { "if-none-match": etag } });
      expect(again.status).toBe(304);
      expect((await again.arrayBuffer()).byteLength).toBe(0);
    } finally {
      await app.close();
    }
  });

  it("answers 429 and closes a connection with more requests waiting than its bound, after the earlier answers", async () => {
    let release: (missing: string[]) => void = () => {};
    const parked = new Promise<string[]>((resolve) => (release = resolve));
    const { app, port } = await listening({ notReady: () => parked, limits: { maxInFlightPerConnection: 4 } });
    try {
      const socket = await connected(port);
      const chunks: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
      // Released once the server has read the fifth request (the one past the bound), not after a
      // guess at how long that takes: released sooner, the first answers would leave room for it.
      let arrived = 0;
      const fifth = new Promise<void>((resolve) =>
        app.server.on("request", () => {
          if (++arrived === 5) resolve();
        }),
      );
      socket.write("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(8));
      await fifth;
      release([]);
      await closed;
      const statuses = [
        ...Buffer.concat(chunks)
          .toString()
          .matchAll(/HTTP\/1\.1 (\d{3}) /g),
      ].map((m) => m[1]);
      expect(statuses).toEqual(["200", "200", "200", "200", "429"]);
    } finally {
      await app.close();
    }
  });
});

/** One GET on its own connection, its head and its body bytes exactly as they came (Content-Length framed). */
function rawGet(url: string, path: string, headerLines: string[]): Promise<{ head: string; body: Buffer }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port: Number(port) }, () =>
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: x\r\n${headerLines.map((l) => `${l}\r\n`).join("")}Connection: close\r\n\r\n`,
      ),
    );
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => {
      const all = Buffer.concat(chunks);
      const at = all.indexOf("\r\n\r\n");
      resolve({ head: all.subarray(0, at).toString(), body: all.subarray(at + 4) });
    });
  });
}
