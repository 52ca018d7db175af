// The common shape of every gateway answer (decisions.md §1) and the per-tenant rate limit
// (decisions.md §2 "Rate limit"), end to end against the distributed deployment.
import { randomBytes, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { provisionTenant, type Res, rawRequest, send, sendSigned } from "../http.js";
import { oneSharedSystem, sharedSystems } from "../shared-system.js";

// ---------------------------------------------------------------------------------------------
// Helpers

const LIMIT = 65_536;
const ROOMY = { rateLimitRps: 100_000, rateLimitBurst: 100_000 };
const VISIBLE_ASCII_ID = /^[\x21-\x7e]{1,128}$/;

/** Asserts an RFC 9457 problem with this status and code, with every field of decisions.md §1, and returns its body. */
function expectProblem(res: Res, status: number, code: string, context = ""): any {
  const where = `${context} -> ${res.status} ${res.text}`;
  expect({ status: res.status, code: res.body?.code }, where).toEqual({ status, code });
  expect(res.headers.get("content-type") ?? "", where).toMatch(/^application\/problem\+json(;|$)/);
  const body = res.body;
  expect(
    typeof body.type === "string" && (body.type === "about:blank" || /^[a-z][a-z0-9+.-]*:/i.test(body.type)),
    where,
  ).toBe(true);
  expect(typeof body.title === "string" && body.title.length > 0, where).toBe(true);
  expect(typeof body.detail === "string", where).toBe(true);
  expect(body.status, where).toBe(status);
  expect(body.instance, where).toBe(res.headers.get("x-request-id"));
  return body;
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** A JSON object of exactly `bytes` bytes. */
function jsonOfSize(bytes: number, name = `body-${randomUUID().slice(0, 8)}`): string {
  const empty = JSON.stringify({ name, pad: "" });
  const text = JSON.stringify({ name, pad: "p".repeat(bytes - empty.length) });
  expect(Buffer.byteLength(text)).toBe(bytes);
  return text;
}

/** A POST whose body is streamed chunk by chunk, so it goes out chunked, without Content-Length. */
async function sendChunked(
  baseUrl: string,
  path: string,
  body: Buffer,
  headers: Record<string, string> = {},
): Promise<Res> {
  let offset = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= body.length) return controller.close();
      const end = Math.min(offset + 8192, body.length);
      controller.enqueue(new Uint8Array(body.subarray(offset, end)));
      offset = end;
    },
  });
  const init = {
    method: "POST",
    body: stream,
    duplex: "half",
    headers: { "content-type": "application/json", ...headers },
  };
  const res = await fetch(baseUrl + path, { ...(init as RequestInit), signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

const allowed = (res: Res) =>
  (res.headers.get("allow") ?? "")
    .split(",")
    .map((m) => m.trim())
    .filter(Boolean)
    .sort();

const RATE_LIMIT = /^"tenant";r=(\d+);t=(\d+)$/;

function rateLimitOf(res: Res): { remaining: number; reset: number; policy: string | null } {
  const header = res.headers.get("ratelimit") ?? "";
  const match = RATE_LIMIT.exec(header);
  expect(match, `RateLimit header "${header}" on ${res.status} ${res.text}`).not.toBeNull();
  return { remaining: Number(match?.[1]), reset: Number(match?.[2]), policy: res.headers.get("ratelimit-policy") };
}

/** `n` copies of one request, sent at once. */
function burst(n: number, request: () => Promise<Res>): Promise<Res[]> {
  return Promise.all(Array.from({ length: n }, request));
}

// ---------------------------------------------------------------------------------------------

// On each shared system: the embedded one (one gateway) and the distributed one (two replicas).
describe.each(oneSharedSystem())("common answer shape ($mode)", (sys) => {
  const url0 = sys.baseUrl;

  const tenant = () => provisionTenant(sys, ROOMY);

  it("/healthz and /readyz answer 200 on every gateway replica, without credentials", async () => {
    for (const url of sys.gatewayUrls) {
      for (const path of ["/healthz", "/readyz"]) {
        const res = await send(url, "GET", path);
        expect(res.status, `${url}${path}: ${res.text}`).toBe(200);
        expect(res.headers.get("x-request-id") ?? "").toMatch(VISIBLE_ASCII_ID);
      }
    }
  });

  it("answers 404 NOT_FOUND to an unknown route, with or without credentials", async () => {
    const t = await tenant();
    const id = randomUUID();
    const routes: [string, string][] = [
      ["GET", "/"],
      ["GET", "/v1"],
      ["GET", "/v1/api"],
      ["GET", `/v1/api/unknown-${id}`],
      ["POST", `/v1/api/unknown-${id}`],
      ["GET", `/v1/replays/${id}/extra`],
      ["GET", `/v1/api/servers/${id}/extra`],
      ["DELETE", `/v1/webhooks/${id}/deliveries/${id}`],
      ["GET", "/v2/replays"],
      ["GET", "/V1/REPLAYS"],
      // The route table's paths are literal: the "." of /openapi.json matches a dot only.
      ["GET", "/openapiXjson"],
    ];
    for (const [method, path] of routes) {
      for (const [who, headers] of [
        ["no credentials", {}],
        ["a valid key", t.bearer()],
        ["a bad key", bearer("svc_live_nope")],
      ] as [string, Record<string, string>][]) {
        expectProblem(await send(url0, method, path, { headers }), 404, "NOT_FOUND", `${method} ${path} with ${who}`);
      }
      const signed = await sendSigned(url0, t.signer, method, path);
      expectProblem(signed, 404, "NOT_FOUND", `${method} ${path} signed`);
    }
  });

  it("answers 405 METHOD_NOT_ALLOWED with an Allow header listing the route's methods, with or without credentials", async () => {
    const t = await tenant();
    const id = randomUUID();
    const cases: [string, string, string[]][] = [
      ["PUT", "/v1/api/servers", ["GET", "POST"]],
      ["DELETE", "/v1/api/servers", ["GET", "POST"]],
      ["GET", `/v1/api/servers/${id}`, ["DELETE", "PATCH"]],
      ["POST", `/v1/api/servers/permanent/${id}`, ["DELETE"]],
      ["GET", `/v1/api/servers/pending/${id}`, ["DELETE"]],
      ["POST", "/v1/api/servers/pending", ["GET"]],
      ["GET", "/v1/api/timeline-events", ["POST"]],
      ["PATCH", `/v1/api/timeline-events/${id}`, ["DELETE"]],
      ["POST", "/v1/api/replays", ["GET"]],
      ["DELETE", `/v1/api/replays/${id}`, ["GET"]],
      ["POST", `/v1/api/replays/${id}/timeline-events`, ["GET"]],
      ["POST", "/v1/replays", ["GET"]],
      ["PUT", `/v1/replays/${id}`, ["DELETE", "GET"]],
      ["PUT", "/v1/webhooks", ["GET", "POST"]],
      ["DELETE", "/v1/webhooks", ["GET", "POST"]],
      ["POST", `/v1/webhooks/${id}`, ["DELETE", "GET", "PATCH"]],
      ["GET", `/v1/webhooks/${id}/rotate-secret`, ["POST"]],
      ["DELETE", `/v1/webhooks/${id}/stats`, ["GET"]],
      ["POST", `/v1/webhooks/${id}/deliveries`, ["GET"]],
      ["DELETE", `/v1/webhooks/deliveries/${id}`, ["GET"]],
      ["GET", `/v1/webhooks/deliveries/${id}/replay`, ["POST"]],
      ["POST", "/healthz", ["GET"]],
      ["DELETE", "/readyz", ["GET"]],
    ];
    for (const [method, path, methods] of cases) {
      for (const [who, headers] of [
        ["no credentials", {}],
        ["a valid key", t.bearer()],
      ] as [string, Record<string, string>][]) {
        const res = await send(url0, method, path, { headers });
        expectProblem(res, 405, "METHOD_NOT_ALLOWED", `${method} ${path} with ${who}`);
        expect(allowed(res), `Allow of ${method} ${path}`).toEqual(methods);
      }
      const signed = await sendSigned(url0, t.signer, method, path);
      expectProblem(signed, 405, "METHOD_NOT_ALLOWED", `${method} ${path} signed`);
      expect(allowed(signed), `Allow of ${method} ${path}`).toEqual(methods);
    }
  });

  it("refuses a body over 65 536 bytes with 413 PAYLOAD_TOO_LARGE before authentication, with Content-Length", async () => {
    const t = await tenant();
    const over = jsonOfSize(LIMIT + 1);
    const cases: [string, string, Record<string, string>][] = [
      ["/v1/api/servers", "no credentials", {}],
      ["/v1/api/servers", "a bad key", bearer("svc_live_nope")],
      ["/v1/api/servers", "a valid key", t.bearer()],
      ["/v1/api/timeline-events", "no credentials", {}],
      ["/v1/webhooks", "no credentials", {}],
      ["/v1/webhooks", "a bearer key", t.bearer()],
      [`/v1/webhooks/deliveries/${randomUUID()}/replay`, "no credentials", {}],
    ];
    for (const [path, who, headers] of cases) {
      const res = await send(url0, "POST", path, { rawBody: over, headers });
      expectProblem(res, 413, "PAYLOAD_TOO_LARGE", `POST ${path} ${LIMIT + 1} bytes with ${who}`);
    }
    const patch = await send(url0, "PATCH", `/v1/api/servers/${randomUUID()}`, { rawBody: over, headers: t.bearer() });
    expectProblem(patch, 413, "PAYLOAD_TOO_LARGE", "PATCH");
  });

  it("refuses a chunked body over 65 536 bytes with 413 PAYLOAD_TOO_LARGE before authentication, without Content-Length", async () => {
    const t = await tenant();
    const body = Buffer.from(jsonOfSize(LIMIT + 1));
    expectProblem(await sendChunked(url0, "/v1/api/servers", body), 413, "PAYLOAD_TOO_LARGE", "no credentials");
    expectProblem(
      await sendChunked(url0, "/v1/api/servers", body, t.bearer()),
      413,
      "PAYLOAD_TOO_LARGE",
      "a valid key",
    );
    expectProblem(
      await sendChunked(url0, "/v1/api/timeline-events", body, t.bearer()),
      413,
      "PAYLOAD_TOO_LARGE",
      "markers, a valid key",
    );
    expectProblem(
      await sendChunked(url0, "/v1/webhooks", body),
      413,
      "PAYLOAD_TOO_LARGE",
      "signed route, no signature",
    );
  });

  it("refuses a body over 65 536 bytes with 413 on GET too, with or without Content-Length, before authentication", async () => {
    const t = await tenant();
    const over = Buffer.from(jsonOfSize(LIMIT + 1));
    for (const chunked of [false, true]) {
      for (const [path, headers] of [
        ["/v1/api/servers", []],
        ["/v1/api/servers", [`Authorization: Bearer ${t.key}`]],
        ["/v1/replays", []],
      ] as const) {
        const res = await rawRequest(url0, `GET ${path}`, [...headers], { body: over, chunked });
        const where = `GET ${path} ${chunked ? "chunked" : "with Content-Length"} ${headers.length ? "with a key" : ""}`;
        expect(res.status, `${where}: ${res.body}`).toBe(413);
        expect(JSON.parse(res.body).code, where).toBe("PAYLOAD_TOO_LARGE");
        expect(res.contentType).toMatch(/^application\/problem\+json/);
      }
    }
    // A GET with a small body is served as before.
    const small = await rawRequest(url0, "GET /v1/api/servers", [`Authorization: Bearer ${t.key}`], {
      body: Buffer.from("{}"),
    });
    expect(small.status, small.body).toBe(200);
  });

  it("a client sending a body far over the limit reads the 413 answer, not a reset connection", async () => {
    // The refusal is only useful if the client can read it: the gateway must not reset the
    // connection under a client that is still sending (RFC 9112 §9.6 "lingering close").
    const body = Buffer.from(jsonOfSize(4 * 1024 * 1024));
    for (let attempt = 1; attempt <= 3; attempt++) {
      const withLength = await send(url0, "POST", "/v1/api/servers", { rawBody: body }).catch((err: Error) => err);
      expect(
        withLength instanceof Error
          ? `${withLength.message}: ${String((withLength.cause as Error)?.message)}`
          : withLength.status,
        `attempt ${attempt}, Content-Length`,
      ).toBe(413);
      const streamed = await sendChunked(url0, "/v1/api/servers", body).catch((err: Error) => err);
      expect(
        streamed instanceof Error
          ? `${streamed.message}: ${String((streamed.cause as Error)?.message)}`
          : streamed.status,
        `attempt ${attempt}, chunked`,
      ).toBe(413);
    }
  });

  it("accepts a body of exactly 65 536 bytes, with Content-Length or chunked", async () => {
    const t = await tenant();
    const exact = jsonOfSize(LIMIT);
    // Without credentials the answer is the 401: the body was not refused for its size.
    expectProblem(
      await send(url0, "POST", "/v1/api/servers", { rawBody: exact }),
      401,
      "UNAUTHENTICATED",
      "no credentials",
    );
    expectProblem(
      await sendChunked(url0, "/v1/api/servers", Buffer.from(exact)),
      401,
      "UNAUTHENTICATED",
      "chunked, no credentials",
    );
    for (const res of [
      await send(url0, "POST", "/v1/api/servers", { rawBody: jsonOfSize(LIMIT), headers: t.bearer() }),
      await sendChunked(url0, "/v1/api/servers", Buffer.from(jsonOfSize(LIMIT)), t.bearer()),
    ]) {
      expect(res.status, res.text).not.toBe(413);
      expect(res.status, res.text).not.toBe(401);
      expect(res.body?.code).not.toBe("INVALID_BODY");
    }
    // A signed body of exactly 64 KiB is hashed and verified whole.
    const signed = await sendSigned(url0, t.signer, "POST", "/v1/webhooks", { body: JSON.parse(exact) });
    expect(signed.status, signed.text).not.toBe(413);
    expect(signed.status, signed.text).not.toBe(401);
  });

  it("answers malformed JSON only after authentication, then with 400 INVALID_BODY", async () => {
    const t = await tenant();
    const readOnly = await t.mintKey(["servers:read"]);
    const id = randomUUID();
    for (const [method, path] of [
      ["POST", "/v1/api/servers"],
      ["PATCH", `/v1/api/servers/${id}`],
    ]) {
      const where = `${method} ${path}`;
      expectProblem(
        await send(url0, method, path, { rawBody: "{not json" }),
        401,
        "UNAUTHENTICATED",
        `${where} without a key`,
      );
      expectProblem(
        await send(url0, method, path, { rawBody: "{not json", headers: bearer(`svc_live_${"x".repeat(40)}`) }),
        401,
        "INVALID_API_KEY",
        where,
      );
      expectProblem(
        await send(url0, method, path, { rawBody: "{not json", headers: bearer(readOnly.key) }),
        403,
        "INSUFFICIENT_SCOPE",
        where,
      );
      for (const raw of ["{not json", '{"name":"x"', "", "[]", "null", '"name"', "42", '{"name":"x"} trailing']) {
        expectProblem(
          await send(url0, method, path, { rawBody: raw, headers: t.bearer() }),
          400,
          "INVALID_BODY",
          `${where} body ${JSON.stringify(raw)}`,
        );
      }
      // JSON is UTF-8: a byte that is not (0xFF), or a lone continuation byte, is a malformed body,
      // not a name with U+FFFD in it.
      for (const bytes of [[0xff], [0x80]]) {
        const raw = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from(bytes), Buffer.from('"}')]);
        expectProblem(
          await send(url0, method, path, { rawBody: raw, headers: t.bearer() }),
          400,
          "INVALID_BODY",
          `${where} body with 0x${bytes[0]?.toString(16)}`,
        );
      }
    }
    expect((await send(url0, "GET", "/v1/api/servers/pending", { headers: t.bearer() })).body.pending).toEqual([]);
    // A signed route: no signature is the 401, before the body is looked at.
    expectProblem(
      await send(url0, "POST", "/v1/webhooks", { rawBody: "{not json" }),
      401,
      "UNAUTHENTICATED",
      "POST /v1/webhooks",
    );
  });

  it("every error answer is application/problem+json with type, title, status, code, detail and instance", async () => {
    const t = await tenant();
    const readOnly = await t.mintKey(["replays:read"]);
    const id = randomUUID();
    const cases: [string, () => Promise<Res>, number, string][] = [
      ["unknown route", () => send(url0, "GET", `/v1/nothing/${id}`), 404, "NOT_FOUND"],
      ["wrong method", () => send(url0, "PUT", "/v1/api/servers"), 405, "METHOD_NOT_ALLOWED"],
      ["no key", () => send(url0, "GET", "/v1/api/servers"), 401, "UNAUTHENTICATED"],
      [
        "bad key",
        () => send(url0, "GET", "/v1/api/servers", { headers: bearer(`svc_live_${"y".repeat(40)}`) }),
        401,
        "INVALID_API_KEY",
      ],
      ["no signature", () => send(url0, "GET", "/v1/replays"), 401, "UNAUTHENTICATED"],
      [
        "no tenant",
        () => send(url0, "GET", "/v1/replays", { headers: { authorization: "FV1-HMAC-SHA256 ts=1" } }),
        401,
        "MISSING_TENANT",
      ],
      [
        "bad signature",
        () => sendSigned(url0, { ...t.signer, secret: `${t.signer.secret}x` }, "GET", "/v1/replays"),
        401,
        "INVALID_SIGNATURE",
      ],
      [
        "expired",
        () => sendSigned(url0, t.signer, "GET", "/v1/replays", { ts: Date.now() - 600_000 }),
        401,
        "REQUEST_EXPIRED",
      ],
      [
        "scope",
        () => send(url0, "GET", "/v1/api/servers", { headers: bearer(readOnly.key) }),
        403,
        "INSUFFICIENT_SCOPE",
      ],
      [
        "too large",
        () => send(url0, "POST", "/v1/api/servers", { rawBody: "x".repeat(LIMIT + 1) }),
        413,
        "PAYLOAD_TOO_LARGE",
      ],
      [
        "malformed JSON",
        () => send(url0, "POST", "/v1/api/servers", { rawBody: "{", headers: t.bearer() }),
        400,
        "INVALID_BODY",
      ],
      ["bad page size", () => sendSigned(url0, t.signer, "GET", "/v1/replays?page_size=101"), 400, "INVALID_PAGE_SIZE"],
    ];
    for (const [name, request, status, code] of cases) {
      const body = expectProblem(await request(), status, code, name);
      for (const field of ["type", "title", "status", "code", "detail", "instance"])
        expect(body, name).toHaveProperty(field);
    }
  });

  it("echoes a client X-Request-Id of 1 to 128 visible ASCII characters, on every kind of answer", async () => {
    const t = await tenant();
    const visible = Array.from({ length: 0x7e - 0x21 + 1 }, (_, i) => String.fromCharCode(0x21 + i)).join("");
    const ids = [
      "a",
      `req-${randomUUID()}`,
      `${visible}${randomBytes(17).toString("hex")}`.slice(0, 128),
      randomBytes(64).toString("hex"),
    ];
    expect(ids[2]).toHaveLength(128);
    expect(ids[3]).toHaveLength(128);
    const requests: [string, (headers: Record<string, string>) => Promise<Res>][] = [
      ["200 key route", (h) => send(url0, "GET", "/v1/api/servers", { headers: { ...t.bearer(), ...h } })],
      ["200 signed route", (h) => sendSigned(url0, t.signer, "GET", "/v1/replays", { headers: h })],
      ["200 healthz", (h) => send(url0, "GET", "/healthz", { headers: h })],
      ["404", (h) => send(url0, "GET", "/v1/nowhere", { headers: h })],
      ["405", (h) => send(url0, "PUT", "/v1/replays", { headers: h })],
      ["401", (h) => send(url0, "GET", "/v1/api/servers", { headers: h })],
      ["401 signed", (h) => send(url0, "GET", "/v1/replays", { headers: h })],
      ["413", (h) => send(url0, "POST", "/v1/api/servers", { rawBody: "x".repeat(LIMIT + 1), headers: h })],
      ["400", (h) => send(url0, "POST", "/v1/api/servers", { rawBody: "{", headers: { ...t.bearer(), ...h } })],
      [
        "404 markers",
        (h) =>
          send(url0, "GET", `/v1/api/replays/${randomUUID()}/timeline-events`, { headers: { ...t.bearer(), ...h } }),
      ],
    ];
    for (const id of ids) {
      for (const [name, request] of requests) {
        const res = await request({ "x-request-id": id });
        expect(res.headers.get("x-request-id"), `${name} with ${id}`).toBe(id);
        if (res.status >= 400) expect(res.body?.instance, name).toBe(id);
      }
    }
    for (const url of sys.gatewayUrls) {
      const id = `replica-${randomUUID()}`;
      expect(
        (await send(url, "GET", "/v1/nowhere", { headers: { "x-request-id": id } })).headers.get("x-request-id"),
      ).toBe(id);
    }
  });

  it("replaces an X-Request-Id that is empty, longer than 128 characters, or not visible ASCII with a fresh one", async () => {
    const t = await tenant();
    const bad = [
      "",
      "x".repeat(129),
      `${randomBytes(65).toString("hex")}`.slice(0, 130),
      `has space ${randomUUID()}`,
      `tab\t${randomUUID()}`,
      `caf\u00e9-${randomUUID()}`,
    ];
    const seen = new Set<string>();
    for (const id of bad) {
      for (const [name, res] of [
        ["200", await send(url0, "GET", "/v1/api/servers", { headers: { ...t.bearer(), "x-request-id": id } })],
        ["404", await send(url0, "GET", "/v1/nowhere", { headers: { "x-request-id": id } })],
        ["401", await send(url0, "GET", "/v1/api/servers", { headers: { "x-request-id": id } })],
      ] as [string, Res][]) {
        const got = res.headers.get("x-request-id") ?? "";
        expect(got, `${name} with ${JSON.stringify(id)}`).toMatch(VISIBLE_ASCII_ID);
        expect(got, `${name} with ${JSON.stringify(id)}`).not.toBe(id);
        if (res.status >= 400) expect(res.body?.instance).toBe(got);
        expect(seen.has(got), `fresh id ${got} was handed out twice`).toBe(false);
        seen.add(got);
      }
    }
  });

  it("every response carries an X-Request-Id, fresh for each request when the client sends none", async () => {
    const t = await tenant();
    const requests: [string, () => Promise<Res>][] = [
      ["200", () => send(url0, "GET", "/v1/api/servers", { headers: t.bearer() })],
      ["200 signed", () => sendSigned(url0, t.signer, "GET", "/v1/replays")],
      ["200 readyz", () => send(url0, "GET", "/readyz")],
      ["404", () => send(url0, "GET", "/nowhere")],
      ["405", () => send(url0, "DELETE", "/v1/api/servers")],
      ["401", () => send(url0, "GET", "/v1/webhooks")],
      ["413", () => send(url0, "POST", "/v1/webhooks", { rawBody: "x".repeat(LIMIT + 1) })],
      ["413 chunked", () => sendChunked(url0, "/v1/webhooks", Buffer.alloc(LIMIT + 1, 0x78))],
      [
        "404 markers",
        () =>
          send(url0, "POST", "/v1/api/timeline-events", {
            body: { replayId: randomUUID(), tick: 1, label: "x" },
            headers: t.bearer(),
          }),
      ],
    ];
    const seen = new Set<string>();
    for (const [name, request] of requests) {
      for (let i = 0; i < 2; i++) {
        const id = (await request()).headers.get("x-request-id") ?? "";
        expect(id, name).toMatch(VISIBLE_ASCII_ID);
        expect(seen.has(id), `${name}: ${id} handed out twice`).toBe(false);
        seen.add(id);
      }
    }
  });

  it.skipIf(sys.gatewayUrls.length < 2)(
    "with two gateway replicas each enforces the tenant's budget divided by two (needs two replicas)",
    async () => {
      // Burst 6 over 2 replicas: 3 per replica, refilled at 1 token/s each (2 rps / 2).
      const t = await provisionTenant(sys, { rateLimitRps: 2, rateLimitBurst: 6 });
      for (const [i, url] of sys.gatewayUrls.entries()) {
        const answers = await burst(4, () => send(url, "GET", "/v1/api/servers", { headers: t.bearer() }));
        const served = answers.filter((r) => r.status === 200);
        const refused = answers.filter((r) => r.status !== 200);
        expect(served, `replica ${i}: ${answers.map((r) => r.status)}`).toHaveLength(3);
        expect(served.map((r) => rateLimitOf(r).remaining).sort()).toEqual([0, 1, 2]);
        for (const res of refused) expectProblem(res, 429, "RATE_LIMITED", `replica ${i}`);
      }
    },
  );
});

describe.each(sharedSystems())("per-tenant rate limit ($mode)", (sys) => {
  const url = sys.baseUrl;
  // Each of R replicas enforces the plan divided by R (GATEWAY_REPLICAS): a plan of R times 2/s with
  // a burst of R times 3 gives the replica these tests talk to 2/s and 3.
  const replicas = sys.gatewayUrls.length;
  const plan = { rateLimitRps: 2 * replicas, rateLimitBurst: 3 * replicas };

  it("serves a new tenant's burst of 3, then answers 429 RATE_LIMITED with Retry-After and RateLimit headers", async () => {
    const t = await provisionTenant(sys, plan);
    // Sent at once, so that the refill (2 tokens/s) cannot add a token in between.
    const answers = await burst(4, () => send(url, "GET", "/v1/api/servers", { headers: t.bearer() }));
    const served = answers.filter((r) => r.status === 200);
    expect(served, answers.map((r) => `${r.status} ${r.text}`).join("\n")).toHaveLength(3);
    expect(served.map((r) => rateLimitOf(r).remaining).sort()).toEqual([0, 1, 2]);
    for (const res of answers) expect(res.headers.get("ratelimit-policy")).toBe(`"tenant";q=${plan.rateLimitRps};w=1`);

    const refused = answers.find((r) => r.status !== 200) as Res;
    expectProblem(refused, 429, "RATE_LIMITED");
    const retryAfter = refused.headers.get("retry-after") ?? "";
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    const limit = rateLimitOf(refused);
    expect(limit.remaining).toBe(0);
    expect(limit.reset).toBeGreaterThanOrEqual(1);
  });

  it("serves the tenant again once Retry-After has passed", async () => {
    const t = await provisionTenant(sys, plan);
    const answers = await burst(4, () => send(url, "GET", "/v1/api/servers", { headers: t.bearer() }));
    const refused = answers.find((r) => r.status === 429);
    expect(refused, "the burst of 3 runs out").toBeDefined();
    const refusedAt = performance.now();
    const retryAfterMs = Number(refused?.headers.get("retry-after")) * 1000;
    // Retry-After names a time: the first request sent once it has passed is served. Sent then,
    // not polled for within Retry-After + 1 s, so that a busy machine's slow answers cannot make a
    // right gateway look late; a Retry-After shorter than the refill still gets this request a 429.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, refusedAt + retryAfterMs - performance.now())));
    const served = await send(url, "GET", "/v1/api/servers", { headers: t.bearer() });
    expect(served.status, served.text).toBe(200);
  });

  it("every authenticated /v1/api answer carries RateLimit-Policy and RateLimit, and takes a token whatever its status", async () => {
    // 1 token/s per replica: slow enough that no refill shows between these few requests.
    const t = await provisionTenant(sys, { rateLimitRps: replicas, rateLimitBurst: 20 * replicas });
    const readOnly = await t.mintKey(["replays:read"]);
    const answers: [string, Res][] = [
      ["200", await send(url, "GET", "/v1/api/servers", { headers: t.bearer() })],
      ["200 replays", await send(url, "GET", "/v1/api/replays", { headers: t.bearer() })],
      ["403", await send(url, "GET", "/v1/api/servers", { headers: bearer(readOnly.key) })],
      ["400", await send(url, "POST", "/v1/api/servers", { rawBody: "{", headers: t.bearer() })],
      ["404 markers", await send(url, "DELETE", `/v1/api/timeline-events/${randomUUID()}`, { headers: t.bearer() })],
    ];
    let previous = 20;
    for (const [name, res] of answers) {
      expect(res.headers.get("ratelimit-policy"), `${name}: ${res.status} ${res.text}`).toBe(
        `"tenant";q=${replicas};w=1`,
      );
      const { remaining } = rateLimitOf(res);
      expect(remaining, `${name} took a token`).toBeLessThan(previous);
      previous = remaining;
    }
  });

  it("a 429 comes before the scope check: a key lacking the scope is refused for the rate once the tokens are gone", async () => {
    const t = await provisionTenant(sys, plan);
    const readOnly = await t.mintKey(["replays:read"]);
    const answers = await burst(4, () => send(url, "GET", "/v1/api/servers", { headers: bearer(readOnly.key) }));
    const codes = answers.map((r) => r.body?.code).sort();
    expect(codes).toEqual(["INSUFFICIENT_SCOPE", "INSUFFICIENT_SCOPE", "INSUFFICIENT_SCOPE", "RATE_LIMITED"]);
    for (const res of answers) expectProblem(res, res.status === 429 ? 429 : 403, res.body?.code);
  });

  it("one budget is shared by all /v1/api routes and all the tenant's keys, and another tenant is unaffected", async () => {
    const t = await provisionTenant(sys, plan);
    const other = await provisionTenant(sys, plan);
    const second = await t.mintKey(["servers:read", "replays:read", "replays:write"]);
    const requests = [
      () => send(url, "GET", "/v1/api/servers", { headers: t.bearer() }),
      () => send(url, "GET", "/v1/api/replays", { headers: bearer(second.key) }),
      () =>
        send(url, "POST", "/v1/api/timeline-events", {
          body: { replayId: randomUUID(), tick: 1, label: "x" },
          headers: t.bearer(),
        }),
      () => send(url, "GET", "/v1/api/servers/pending", { headers: bearer(second.key) }),
      () => send(url, "GET", `/v1/api/replays/${randomUUID()}`, { headers: t.bearer() }),
      () => send(url, "DELETE", `/v1/api/timeline-events/${randomUUID()}`, { headers: bearer(second.key) }),
    ];
    const answers = await Promise.all(requests.map((request) => request()));
    const refused = answers.filter((r) => r.status === 429);
    expect(refused, answers.map((r) => `${r.status} ${r.text}`).join("\n")).toHaveLength(3);
    for (const res of refused) expectProblem(res, 429, "RATE_LIMITED");

    const unaffected = await send(url, "GET", "/v1/api/servers", { headers: other.bearer() });
    expect(unaffected.status, unaffected.text).toBe(200);
    expect(rateLimitOf(unaffected).remaining).toBe(2);
  });

  it("signed routes neither spend nor need the /v1/api budget", async () => {
    const t = await provisionTenant(sys, plan);
    for (let i = 0; i < 5; i++) {
      const signed = await sendSigned(url, t.signer, "GET", "/v1/replays");
      expect(signed.status, signed.text).toBe(200);
    }
    // The five signed requests took nothing: the bucket is still full.
    const first = await send(url, "GET", "/v1/api/servers", { headers: t.bearer() });
    expect(rateLimitOf(first).remaining).toBe(2);
    // And with the budget spent, signed requests are still served.
    const spent = await burst(4, () => send(url, "GET", "/v1/api/servers", { headers: t.bearer() }));
    expect(spent.some((r) => r.status === 429)).toBe(true);
    const signed = await sendSigned(url, t.signer, "GET", "/v1/replays");
    expect(signed.status, signed.text).toBe(200);
  });

  it("the webhook replay route, keyed but outside /v1/api, neither spends nor needs the budget", async () => {
    const t = await provisionTenant(sys, plan);
    const replay = () => send(url, "POST", `/v1/webhooks/deliveries/${randomUUID()}/replay`, { headers: t.bearer() });
    for (let i = 0; i < 5; i++) {
      const res = await replay();
      expect(res.status, res.text).not.toBe(429);
      expect(res.headers.get("ratelimit")).toBeNull();
    }
    const first = await send(url, "GET", "/v1/api/servers", { headers: t.bearer() });
    expect(rateLimitOf(first).remaining).toBe(2);
    const spent = await burst(4, () => send(url, "GET", "/v1/api/servers", { headers: t.bearer() }));
    expect(spent.some((r) => r.status === 429)).toBe(true);
    expect((await replay()).status).not.toBe(429);
  });
});
