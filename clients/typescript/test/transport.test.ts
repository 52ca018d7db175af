import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { createReplayClient, type ReplayClientOptions, USER_AGENT } from "@replay/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The client's transport over real HTTP against a scripted server: which requests it sends again,
// with what, and when it stops. The same against the running system is in test/client-system.test.ts
// (a real 429) and test/faults/backend-down.test.ts (a real 503 while a service restarts).

type Seen = { method: string; url: string; headers: IncomingMessage["headers"]; body: string };
type Script = (seen: Seen, index: number, res: ServerResponse) => void;

let baseUrl = "";
let script: Script = (_seen, _index, res) => res.end();
let seen: Seen[] = [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk: Buffer) => {
    body += chunk.toString("utf8");
  });
  req.on("end", () => {
    const entry = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body };
    seen.push(entry);
    script(entry, seen.length - 1, res);
  });
});
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
// Requests left unanswered on purpose ("silence") would hold close() until their sockets went.
afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);

/** The server answers each request in turn with the next of `answers`, the last one repeating. */
function answers(
  ...list: Array<{ status: number; headers?: Record<string, string>; body?: unknown } | "reset" | "silence">
) {
  seen = [];
  script = (_seen, index, res) => {
    const next = list[Math.min(index, list.length - 1)];
    if (next === "silence") return; // never answers; the client's deadline ends the attempt
    if (next === "reset") {
      res.socket?.destroy();
      return;
    }
    res.writeHead(next?.status ?? 500, { "content-type": "application/json", ...next?.headers });
    res.end(next?.body === undefined ? "" : JSON.stringify(next.body));
  };
}

const signingKey = { tenant: "7d7c2f36-0c1e-4c4e-9d4b-5a0f7c3b1e20", kid: "sk_1", secret: "s" };
const client = (options: Partial<ReplayClientOptions> = {}) =>
  createReplayClient({ baseUrl, apiKey: "svc_live_k", signingKey, retry: { baseDelayMs: 1 }, ...options });
const unavailable = { status: 503, headers: { "retry-after": "0" }, body: { code: "SERVICE_UNAVAILABLE" } };
const page = { status: 200, body: { results: [], next_page_token: "", page_size: 20 } };

describe("the client's retries", () => {
  it("sends a GET again after a 503 with Retry-After, signed anew (a nonce is good once)", async () => {
    answers(unavailable, page);
    const { data, response } = await client().GET("/v1/replays");
    expect(response.status).toBe(200);
    expect(data?.results).toEqual([]);
    expect(seen).toHaveLength(2);
    const nonce = (s: Seen) => /nonce=([^,]+)/.exec(String(s.headers.authorization))?.[1];
    expect(nonce(seen[0] as Seen)).toBeDefined();
    expect(nonce(seen[0] as Seen)).not.toBe(nonce(seen[1] as Seen));
  });

  it("sends a 429'd GET again after the wait its RateLimit header gives, and DELETE like GET", async () => {
    answers(
      { status: 429, headers: { ratelimit: '"tenant";r=0;t=0' }, body: { code: "RATE_LIMITED" } },
      { status: 204 },
    );
    const { response } = await client().DELETE("/v1/api/servers/{id}", { params: { path: { id: "x" } } });
    expect(response.status).toBe(204);
    expect(seen.map((s) => s.method)).toEqual(["DELETE", "DELETE"]);
  });

  it("gives up after maxAttempts and returns the last answer", async () => {
    answers(unavailable);
    const { error, response } = await client({ retry: { maxAttempts: 4, baseDelayMs: 1 } }).GET("/v1/api/servers");
    expect(response.status).toBe(503);
    expect(error?.code).toBe("SERVICE_UNAVAILABLE");
    expect(seen).toHaveLength(4);
  });

  it("never sends another write twice: a POST, a PATCH, a delivery replay, a key on it or not", async () => {
    answers(unavailable);
    const c = client();
    await c.POST("/v1/api/servers", { body: { name: "eu-1" } });
    await c.PATCH("/v1/api/servers/{id}", { params: { path: { id: "x" } }, body: { name: "eu-2" } });
    // The server ignores a key on any route but marker creates: each call is one more attempt.
    const keyed = { headers: { "Idempotency-Key": "k1" } };
    await c.POST("/v1/webhooks/deliveries/{id}/replay", { params: { path: { id: "x" } }, ...keyed });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      "POST /v1/api/servers",
      "PATCH /v1/api/servers/x",
      "POST /v1/webhooks/deliveries/x/replay",
    ]);
  });

  it("gives a marker create an Idempotency-Key and sends it again with the same key and body", async () => {
    answers(unavailable, { status: 201, body: { id: "m" } });
    const body = { serverId: "s", tick: 5, label: "boss ✓" };
    const { response } = await client().POST("/v1/api/timeline-events", { body });
    expect(response.status).toBe(201);
    expect(seen).toHaveLength(2);
    const [first, second] = seen as [Seen, Seen];
    expect(first.headers["idempotency-key"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(second.headers["idempotency-key"]).toBe(first.headers["idempotency-key"]);
    expect(second.body).toBe(first.body);
    expect(JSON.parse(first.body)).toEqual(body);
  });

  it("keeps the caller's Idempotency-Key; without keys (idempotencyKeys: false) a marker create is sent once", async () => {
    answers(unavailable);
    const body = { serverId: "s", tick: 5, label: "x" };
    await client().POST("/v1/api/timeline-events", { body, params: { header: { "Idempotency-Key": "mine-1" } } });
    expect(seen.map((s) => s.headers["idempotency-key"])).toEqual(["mine-1", "mine-1", "mine-1"]);
    answers(unavailable);
    await client({ idempotencyKeys: false }).POST("/v1/api/timeline-events", { body });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers["idempotency-key"]).toBeUndefined();
  });

  it("does not retry a 503 without Retry-After, nor wait longer than maxDelayMs", async () => {
    answers({ status: 503, body: { code: "WEBHOOK_DELIVERY_UNCONFIGURED" } });
    expect((await client().GET("/v1/webhooks")).response.status).toBe(503);
    expect(seen).toHaveLength(1);
    answers({ status: 503, headers: { "retry-after": "120" }, body: { code: "SERVICE_UNAVAILABLE" } });
    expect((await client().GET("/v1/webhooks")).response.status).toBe(503);
    expect(seen).toHaveLength(1);
  });

  it("sends a GET again when the connection is reset before an answer; not a POST", async () => {
    answers("reset", page);
    expect((await client().GET("/v1/replays")).response.status).toBe(200);
    expect(seen).toHaveLength(2);
    answers("reset", { status: 201, body: {} });
    await expect(client().POST("/v1/api/servers", { body: { name: "n" } })).rejects.toThrow();
    expect(seen).toHaveLength(1);
  });

  it("gives up an attempt at its deadline: a GET is sent again, a POST fails with the TimeoutError", async () => {
    // Long enough that a busy machine answers a later attempt well within it, with four chances.
    const timeoutMs = 2_000;
    answers("silence", page);
    const retrying = client({ timeoutMs, retry: { maxAttempts: 5, baseDelayMs: 1 } });
    expect((await retrying.GET("/v1/replays")).response.status).toBe(200);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    answers("silence");
    await expect(client({ timeoutMs }).POST("/v1/api/servers", { body: { name: "n" } })).rejects.toMatchObject({
      name: "TimeoutError",
    });
    expect(seen).toHaveLength(1);
    expect(() => client({ timeoutMs: 0 })).toThrow(RangeError);
  });

  it("ends an attempt at its deadline however often memory is collected while it waits", async () => {
    // undici's Request follows a signal through weak references: a deadline nothing else held was
    // collected and never fired. The race bounds the hang the old code showed, not the deadline.
    v8.setFlagsFromString("--expose-gc");
    const collectGarbage = runInNewContext("gc") as () => void;
    const collecting = setInterval(collectGarbage, 10);
    try {
      answers("silence");
      const call = client({ timeoutMs: 300, retry: false }).GET("/v1/replays");
      const hung = new Promise((resolve) => setTimeout(resolve, 30_000, "still waiting after 30 s"));
      await expect(Promise.race([call, hung])).rejects.toMatchObject({ name: "TimeoutError" });
    } finally {
      clearInterval(collecting);
    }
  });

  it("stops waiting when the caller aborts", async () => {
    answers({ status: 503, headers: { "retry-after": "20" }, body: { code: "SERVICE_UNAVAILABLE" } });
    const controller = new AbortController();
    const call = client().GET("/v1/api/servers", { signal: controller.signal });
    await expect.poll(() => seen.length).toBe(1);
    controller.abort(new Error("caller gave up"));
    await expect(call).rejects.toThrow("caller gave up");
    expect(seen).toHaveLength(1);
  });

  it("ends an attempt in flight when the caller aborts, with the caller's reason, and sends nothing more", async () => {
    answers("silence");
    const controller = new AbortController();
    const call = client({ retry: { maxAttempts: 5, baseDelayMs: 1 } }).GET("/v1/replays", {
      signal: controller.signal,
    });
    await expect.poll(() => seen.length).toBe(1);
    controller.abort(new Error("caller gave up"));
    await expect(call).rejects.toThrow("caller gave up");
    expect(seen).toHaveLength(1);
  });

  it("keeps the defaults for retry fields given as undefined", async () => {
    answers(unavailable);
    const { response } = await client({ retry: { maxAttempts: undefined, baseDelayMs: 1 } }).GET("/v1/api/servers");
    expect(response.status).toBe(503);
    expect(seen).toHaveLength(3);
  });

  it("retry: false sends every request once", async () => {
    answers(unavailable, page);
    expect((await client({ retry: false }).GET("/v1/replays")).response.status).toBe(503);
    expect(seen).toHaveLength(1);
  });
});

describe("the client's requests", () => {
  it("say which client sent them, unless the caller names itself", async () => {
    answers(page);
    await client().GET("/v1/replays");
    await client().GET("/v1/replays", { headers: { "User-Agent": "my-studio/2" } });
    expect(seen.map((s) => s.headers["user-agent"])).toEqual([USER_AGENT, "my-studio/2"]);
  });

  it("return a redirect as it is, never following it with the credentials", async () => {
    answers({ status: 307, headers: { location: `${baseUrl}/elsewhere` } });
    const { response } = await client().POST("/v1/api/timeline-events", {
      body: { serverId: "s", tick: 1, label: "l" },
    });
    expect(response.status).toBe(307);
    expect(seen.map((s) => s.url)).toEqual(["/v1/api/timeline-events"]);
  });

  it("return a 401 whose body is not a problem untouched", async () => {
    answers({ status: 401, headers: { date: new Date().toUTCString() }, body: null });
    const { error, response } = await client().GET("/v1/replays");
    expect(response.status).toBe(401);
    expect(error).toBeNull();
  });

  it("need the gateway's origin as the base URL: a path there could never be signed", () => {
    expect(() => createReplayClient({ baseUrl: `${baseUrl}/replay` })).toThrow(TypeError);
    expect(() => createReplayClient({ baseUrl: `${baseUrl}/` })).not.toThrow();
  });
});
