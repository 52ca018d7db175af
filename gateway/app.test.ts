import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { buildApp } from "./app.js";
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
    socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: drain-1\r\n\r\n");
    await new Promise((resolve) => setTimeout(resolve, 100));
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
