// Authentication and tenancy at the gateway, end to end: decisions.md §2 ("API keys", "Request
// signing", "Tenancy") against the distributed deployment with two gateway replicas.
import { createHash, createHmac, randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  canonicalQuery,
  canonicalString,
  hmacSha256Hex,
  SIGNING_SCHEME,
  sha256Hex,
  signRequest,
} from "../lib/signing.js";
import { expectProblem } from "./expect.js";
import {
  ALL_SCOPES,
  pollUntilRevoked,
  provisionTenant,
  type Res,
  rawRequest,
  type Signer,
  send,
  sendSigned,
} from "./http.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";
import type { SystemHandle } from "./system.js";

// ---------------------------------------------------------------------------------------------
// Helpers

/** A plan roomy enough that the rate limit never answers in these tests (it has its own file). */
const ROOMY = { rateLimitRps: 100_000, rateLimitBurst: 100_000 };
const API_KEY_FORMAT = /^svc_live_[0-9A-Za-z]{40}$/;
const AUTH_CODES = [
  "UNAUTHENTICATED",
  "INVALID_API_KEY",
  "MISSING_TENANT",
  "INVALID_SIGNATURE",
  "REQUEST_EXPIRED",
  "NONCE_REUSED",
];
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Asserts the request got past authentication (and scope): whatever the route answers, it is not 401 or 403. */
function expectAuthenticated(res: Res, context = ""): void {
  expect(res.status, `${context} -> ${res.status} ${res.text}`).not.toBe(401);
  expect(res.status, `${context} -> ${res.status} ${res.text}`).not.toBe(403);
  expect(AUTH_CODES, context).not.toContain(res.body?.code);
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const newNonce = () => randomBytes(18).toString("base64url");
const unknownKey = () => `svc_live_${Array.from(randomBytes(40), (b) => BASE62[b % 62]).join("")}`;

type Param = "tenant" | "ts" | "nonce" | "kid" | "sig";
type Params = Record<Param, string>;

/**
 * The five signature parameters of a request to `target` (path and raw query as sent). Every value
 * goes into the canonical string verbatim, so a malformed one is signed as it is sent: the gateway
 * must refuse it for its form, not for a signature mismatch. `query` replaces the canonical query
 * line (to sign a hand-written one); `secret` signs with another secret.
 */
function sign(
  signer: Signer,
  method: string,
  target: string,
  opts: {
    body?: string;
    ts?: number | string;
    nonce?: string;
    tenant?: string;
    kid?: string;
    secret?: string;
    query?: string;
  } = {},
): Params {
  const at = target.indexOf("?");
  const path = at === -1 ? target : target.slice(0, at);
  const query = opts.query ?? canonicalQuery(at === -1 ? "" : target.slice(at));
  if (query === undefined) throw new Error(`cannot canonicalise ${target}; pass opts.query`);
  const tenant = opts.tenant ?? signer.tenant;
  const ts = String(opts.ts ?? Date.now());
  const nonce = opts.nonce ?? newNonce();
  const kid = opts.kid ?? signer.kid;
  const canonical = canonicalString({
    tenant,
    ts,
    nonce,
    kid,
    method,
    path,
    query,
    bodySha256: sha256Hex(opts.body ?? ""),
  });
  return { tenant, ts, nonce, kid, sig: hmacSha256Hex(opts.secret ?? signer.secret, canonical) };
}

/** The Authorization header from parameters, in the order given. */
function authorization(
  params: Partial<Params> | [string, string][],
  { scheme = SIGNING_SCHEME, separator = "," } = {},
): string {
  const entries = Array.isArray(params) ? params : Object.entries(params);
  return `${scheme} ${entries.map(([name, value]) => `${name}=${value}`).join(separator)}`;
}

function omit(params: Params, ...names: Param[]): Partial<Params> {
  return Object.fromEntries(Object.entries(params).filter(([name]) => !names.includes(name as Param)));
}

/** One request with exactly this Authorization header (or none) and these raw body bytes. */
function call(
  baseUrl: string,
  method: string,
  target: string,
  auth: string | undefined,
  body?: string,
  headers: Record<string, string> = {},
) {
  return send(baseUrl, method, target, {
    rawBody: body,
    headers: { ...(auth === undefined ? {} : { authorization: auth }), ...headers },
  });
}

const EMPTY_PAGE = { results: [], next_page_token: "", page_size: 20 };

/** Every API-key route of the table with the scope it needs (501 routes included). */
function keyRoutes(): { scope: string; method: string; path: string; body?: unknown }[] {
  const id = randomUUID();
  return [
    { scope: "servers:read", method: "GET", path: "/v1/api/servers" },
    { scope: "servers:read", method: "GET", path: "/v1/api/servers/pending" },
    { scope: "servers:write", method: "POST", path: "/v1/api/servers", body: { name: `scoped-${id.slice(0, 8)}` } },
    { scope: "servers:write", method: "PATCH", path: `/v1/api/servers/${id}`, body: { name: "renamed" } },
    { scope: "servers:write", method: "DELETE", path: `/v1/api/servers/${id}` },
    { scope: "servers:write", method: "DELETE", path: `/v1/api/servers/permanent/${id}` },
    { scope: "servers:write", method: "DELETE", path: `/v1/api/servers/pending/${id}` },
    {
      scope: "replays:write",
      method: "POST",
      path: "/v1/api/timeline-events",
      body: { replayId: id, tick: 1, label: "scoped" },
    },
    { scope: "replays:write", method: "DELETE", path: `/v1/api/timeline-events/${id}` },
    { scope: "replays:read", method: "GET", path: "/v1/api/replays" },
    { scope: "replays:read", method: "GET", path: `/v1/api/replays/${id}` },
    { scope: "replays:read", method: "GET", path: `/v1/api/replays/${id}/timeline-events` },
    { scope: "collections:write", method: "POST", path: `/v1/webhooks/deliveries/${id}/replay` },
  ];
}

/** Every signed route of the table (501 routes included), with a body where the route takes one. */
function signedRoutes(): { method: string; path: string; body?: string }[] {
  const id = randomUUID();
  return [
    { method: "GET", path: "/v1/replays" },
    { method: "GET", path: `/v1/replays/${id}` },
    { method: "DELETE", path: `/v1/replays/${id}` },
    {
      method: "POST",
      path: "/v1/webhooks",
      body: JSON.stringify({ url: "https://example.com/hook", events: ["asset.ready"] }),
    },
    { method: "GET", path: "/v1/webhooks" },
    { method: "DELETE", path: `/v1/webhooks/${id}` },
    { method: "GET", path: `/v1/webhooks/${id}/deliveries` },
    { method: "GET", path: `/v1/webhooks/deliveries/${id}` },
  ];
}

/** A connected server of the tenant: a pending setup through the API, connected by its first check-in. */
async function seedServer(sys: SystemHandle, bearer: Record<string, string>, name: string): Promise<string> {
  const created = await send(sys.baseUrl, "POST", "/v1/api/servers", { headers: bearer, body: { name } });
  if (created.status !== 201) throw new Error(`creating a server failed: ${created.text}`);
  const serverId = created.body.serverId as string;
  await grpcCheckIn(sys.internalUrl, serverId);
  return serverId;
}

async function apiKeyRow(sys: SystemHandle, keyId: string): Promise<Record<string, unknown> | undefined> {
  const client = new pg.Client({ connectionString: sys.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query("SELECT * FROM identity.api_key WHERE key_id = $1", [keyId]);
    return rows[0];
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------

// Every rule on each shared system: the embedded one (one gateway) and the distributed one (two
// gateway replicas, where "the other replica" is a second process).
describe.each(sharedSystems())("authentication and tenancy ($mode)", (sys) => {
  const [url0 = "", url1 = url0] = sys.gatewayUrls;
  const oneReplica = sys.gatewayUrls.length < 2;

  const tenant = () => provisionTenant(sys, ROOMY);

  describe("API keys", () => {
    // Reads the identity schema, which only the distributed system exposes to the test.
    it.skipIf(!sys.databaseUrl)(
      "mints keys as svc_live_ followed by 40 base62 characters, a new one every time, stored only as SHA-256 hex (reads the database: distributed only)",
      async () => {
        const t = await tenant();
        const minted = [{ keyId: t.keyId, key: t.key }];
        for (const scopes of [["servers:read"], ["replays:read", "replays:write"], ALL_SCOPES])
          minted.push(await t.mintKey(scopes));
        minted.push(await t.mintKey(["servers:read"], null));
        for (const { key } of minted) expect(key).toMatch(API_KEY_FORMAT);
        expect(new Set(minted.map((m) => m.key)).size).toBe(minted.length);

        const row = await apiKeyRow(sys, t.keyId);
        expect(row?.key_hash).toBe(sha256Hex(t.key));
        expect(JSON.stringify(row)).not.toContain(t.key.slice("svc_live_".length));
      },
    );

    it("a correctly authenticated key is accepted on every gateway replica", async () => {
      const t = await tenant();
      for (const url of sys.gatewayUrls) {
        const res = await send(url, "GET", "/v1/api/servers", { headers: t.bearer() });
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual({ servers: [] });
      }
    });

    it("answers 401 UNAUTHENTICATED on every key route without an Authorization header", async () => {
      for (const route of keyRoutes()) {
        const res = await send(url0, route.method, route.path, { body: route.body });
        expectProblem(res, 401, "UNAUTHENTICATED", `${route.method} ${route.path}`);
      }
    });

    it("answers 401 UNAUTHENTICATED to a scheme other than Bearer, a bare key, or Bearer with no token", async () => {
      const t = await tenant();
      const signed = authorization(sign(t.signer, "GET", "/v1/api/servers"));
      const headers = [
        `Basic ${Buffer.from(`user:${t.key}`).toString("base64")}`,
        t.key,
        `Token ${t.key}`,
        `Bearer-Token ${t.key}`,
        `${t.key} Bearer`,
        "Bearer",
        signed,
      ];
      for (const header of headers) {
        expectProblem(await call(url0, "GET", "/v1/api/servers", header), 401, "UNAUTHENTICATED", header);
      }
    });

    it("answers 401 UNAUTHENTICATED to an Authorization header carrying more than one credential", async () => {
      const t = await tenant();
      const other = await t.mintKey(["servers:read"]);
      const headers = [
        `Bearer ${t.key}, Bearer ${t.key}`,
        `Bearer ${t.key}, Bearer ${other.key}`,
        `Bearer ${t.key} ${other.key}`,
        `Bearer ${t.key}, Basic ${Buffer.from("user:pass").toString("base64")}`,
        `Bearer ${t.key}, ${authorization(sign(t.signer, "GET", "/v1/api/servers"))}`,
      ];
      for (const header of headers) {
        expectProblem(await call(url0, "GET", "/v1/api/servers", header), 401, "UNAUTHENTICATED", header);
      }
    });

    it("matches the Bearer scheme name case-insensitively", async () => {
      const t = await tenant();
      for (const scheme of ["bearer", "BEARER", "bEaReR"]) {
        const res = await call(url0, "GET", "/v1/api/servers", `${scheme} ${t.key}`);
        expect(res.status, `${scheme}: ${res.text}`).toBe(200);
        expect(res.body).toEqual({ servers: [] });
      }
    });

    it("answers 401 INVALID_API_KEY to a bearer token that is not a known key, on every key route", async () => {
      const t = await tenant();
      const body = t.key.slice("svc_live_".length);
      const swapped = [...body].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("");
      const tokens = [
        unknownKey(),
        "not-a-key",
        `${t.key}x`,
        t.key.slice(0, -1),
        `svc_test_${body}`,
        `svc_live_${swapped}`,
        sha256Hex(t.key),
        t.signer.secret,
        t.signer.kid,
      ];
      for (const token of tokens) {
        expectProblem(await call(url0, "GET", "/v1/api/servers", `Bearer ${token}`), 401, "INVALID_API_KEY", token);
      }
      const token = unknownKey();
      for (const route of keyRoutes()) {
        const res = await send(url0, route.method, route.path, { body: route.body, headers: bearer(token) });
        expectProblem(res, 401, "INVALID_API_KEY", `${route.method} ${route.path}`);
      }
    });

    // A key without a route's scope is refused on every key route: the route tests beside
    // gateway/routes/ hold each one.
    it("a key holding only a route's scope is let through on every key route", async () => {
      const t = await tenant();
      const only = new Map<string, string>();
      for (const scope of ALL_SCOPES) only.set(scope, (await t.mintKey([scope])).key);
      for (const route of keyRoutes()) {
        const res = await send(url0, route.method, route.path, {
          body: route.body,
          headers: bearer(only.get(route.scope) as string),
        });
        expectAuthenticated(res, `${route.method} ${route.path} with only ${route.scope}`);
      }
    });

    it("a revoked key answers 401 INVALID_API_KEY while the tenant's other keys keep working", async () => {
      const t = await tenant();
      const doomed = await t.mintKey(["servers:read"]);
      expect((await send(url0, "GET", "/v1/api/servers", { headers: bearer(doomed.key) })).status).toBe(200);
      await sys.admin.revokeApiKey({ keyId: doomed.keyId });
      expectProblem(
        await send(url0, "GET", "/v1/api/servers", { headers: bearer(doomed.key) }),
        401,
        "INVALID_API_KEY",
      );
      const res = await send(url0, "GET", "/v1/api/servers", { headers: t.bearer() });
      expect(res.status, res.text).toBe(200);
    });

    it("revoking a key refuses it on every gateway replica within one second", async () => {
      const t = await tenant();
      const doomed = await t.mintKey(["servers:read"]);
      // Both replicas have just accepted (and cached) the key.
      for (const url of sys.gatewayUrls) {
        const res = await send(url, "GET", "/v1/api/servers", { headers: bearer(doomed.key) });
        expect(res.status, `${url}: ${res.text}`).toBe(200);
      }
      await sys.admin.revokeApiKey({ keyId: doomed.keyId });
      const revokedAt = performance.now();
      // Every request sent a second or more after the revocation is refused; the contract bounds
      // when a request arrives, and a busy machine only delays the answers.
      const polled = await Promise.all(
        sys.gatewayUrls.map(async (url) => {
          const { refused, lastAcceptedSentMs } = await pollUntilRevoked(url, bearer(doomed.key), revokedAt);
          expectProblem(refused, 401, "INVALID_API_KEY", url);
          return lastAcceptedSentMs;
        }),
      );
      for (const [i, ms] of polled.entries())
        expect(ms, `replica ${i} accepted a request sent ${Math.round(ms)} ms after the revocation`).toBeLessThan(1000);
      // And it stays refused.
      for (const url of sys.gatewayUrls) {
        expectProblem(
          await send(url, "GET", "/v1/api/servers", { headers: bearer(doomed.key) }),
          401,
          "INVALID_API_KEY",
          url,
        );
      }
    });
  });

  describe("request signing", () => {
    it("accepts a correctly signed request on every gateway replica, in the documented header form", async () => {
      const t = await tenant();
      const signed = signRequest({ ...t.signer, method: "GET", url: `${url0}/v1/replays` });
      expect(signed.authorization).toMatch(
        /^FV1-HMAC-SHA256 tenant=[0-9a-f-]{36},ts=\d+,nonce=[A-Za-z0-9_-]{16,64},kid=[^,]+,sig=[0-9a-f]{64}$/,
      );
      for (const url of sys.gatewayUrls) {
        const res = await sendSigned(url, t.signer, "GET", "/v1/replays");
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual(EMPTY_PAGE);
      }
    });

    it("verifies the canonical string exactly as documented: nine lines joined by \\n, no trailing newline", async () => {
      const t = await tenant();
      const body = JSON.stringify({ url: "https://example.com/hook", events: ["asset.ready"] });
      const ts = String(Date.now());
      const lines = (nonce: string, method: string, path: string, query: string, bytes: string) => [
        "FV1-HMAC-SHA256",
        t.tenantId,
        ts,
        nonce,
        t.signer.kid,
        method,
        path,
        query,
        createHash("sha256").update(bytes, "utf8").digest("hex"),
      ];
      const hmac = (text: string) =>
        createHmac("sha256", Buffer.from(t.signer.secret, "utf8")).update(text, "utf8").digest("hex");
      const header = (nonce: string, sig: string) =>
        `FV1-HMAC-SHA256 tenant=${t.tenantId},ts=${ts},nonce=${nonce},kid=${t.signer.kid},sig=${sig}`;

      let nonce = newNonce();
      let res = await call(
        url0,
        "GET",
        "/v1/replays?page_size=7&a=1",
        header(nonce, hmac(lines(nonce, "GET", "/v1/replays", "a=1&page_size=7", "").join("\n"))),
      );
      expect(res.status, res.text).toBe(200);
      expect(res.body.page_size).toBe(7);

      nonce = newNonce();
      res = await call(
        url0,
        "POST",
        "/v1/webhooks",
        header(nonce, hmac(lines(nonce, "POST", "/v1/webhooks", "", body).join("\n"))),
        body,
      );
      expectAuthenticated(res, "POST /v1/webhooks signed by hand");

      nonce = newNonce();
      const trailing = `${lines(nonce, "GET", "/v1/replays", "", "").join("\n")}\n`;
      expectProblem(
        await call(url0, "GET", "/v1/replays", header(nonce, hmac(trailing))),
        401,
        "INVALID_SIGNATURE",
        "trailing newline",
      );
      nonce = newNonce();
      const lower = lines(nonce, "get", "/v1/replays", "", "").join("\n");
      expectProblem(
        await call(url0, "GET", "/v1/replays", header(nonce, hmac(lower))),
        401,
        "INVALID_SIGNATURE",
        "lower-case method",
      );
    });

    it("accepts every signed route of the table with a valid signature", async () => {
      const t = await tenant();
      for (const route of signedRoutes()) {
        const auth = authorization(sign(t.signer, route.method, route.path, { body: route.body }));
        expectAuthenticated(
          await call(url0, route.method, route.path, auth, route.body),
          `${route.method} ${route.path}`,
        );
      }
    });

    it("answers 401 UNAUTHENTICATED on every signed route without Authorization, with a bearer key, or with another scheme", async () => {
      const t = await tenant();
      for (const route of signedRoutes()) {
        const where = `${route.method} ${route.path}`;
        expectProblem(
          await call(url0, route.method, route.path, undefined, route.body),
          401,
          "UNAUTHENTICATED",
          `${where} without Authorization`,
        );
        expectProblem(
          await call(url0, route.method, route.path, `Bearer ${t.key}`, route.body),
          401,
          "UNAUTHENTICATED",
          `${where} with a key`,
        );
        const params = sign(t.signer, route.method, route.path, { body: route.body });
        for (const scheme of ["AWS4-HMAC-SHA256", "FV2-HMAC-SHA256", "HMAC", "Basic"]) {
          const res = await call(url0, route.method, route.path, authorization(params, { scheme }), route.body);
          expectProblem(res, 401, "UNAUTHENTICATED", `${where} with scheme ${scheme}`);
        }
      }
    });

    it("answers 401 UNAUTHENTICATED to a signed Authorization header carrying a second credential", async () => {
      const t = await tenant();
      const one = authorization(sign(t.signer, "GET", "/v1/replays"));
      const two = authorization(sign(t.signer, "GET", "/v1/replays"));
      for (const header of [`${one}, Bearer ${t.key}`, `${one}, ${two}`, `Bearer ${t.key}, ${one}`]) {
        expectProblem(await call(url0, "GET", "/v1/replays", header), 401, "UNAUTHENTICATED", header);
      }
    });

    it("answers 401 MISSING_TENANT on every signed route when the tenant parameter is absent", async () => {
      const t = await tenant();
      for (const route of signedRoutes()) {
        const auth = authorization(omit(sign(t.signer, route.method, route.path, { body: route.body }), "tenant"));
        expectProblem(
          await call(url0, route.method, route.path, auth, route.body),
          401,
          "MISSING_TENANT",
          `${route.method} ${route.path}`,
        );
      }
      expectProblem(await call(url0, "GET", "/v1/replays", SIGNING_SCHEME), 401, "MISSING_TENANT", "scheme alone");
    });

    it("accepts parameters in any order, spaces after commas and the scheme name in any letter case", async () => {
      const t = await tenant();
      // The layouts the parser accepts are a unit table (gateway/auth/signature-header.test.ts);
      // end to end, two of them show the gateway verifies what the parser accepts.
      const variants: ((p: Params) => string)[] = [
        (p) =>
          authorization(
            [
              ["kid", p.kid],
              ["tenant", p.tenant],
              ["sig", p.sig],
              ["ts", p.ts],
              ["nonce", p.nonce],
            ],
            { separator: ", " },
          ),
        (p) => authorization(p, { scheme: "Fv1-Hmac-Sha256", separator: ", " }),
      ];
      for (const [i, variant] of variants.entries()) {
        const header = variant(sign(t.signer, "GET", "/v1/replays"));
        const res = await call(url0, "GET", "/v1/replays", header);
        expect(res.status, `variant ${i}: ${header} -> ${res.text}`).toBe(200);
        expect(res.body).toEqual(EMPTY_PAGE);
      }
    });

    // The header's grammar is a unit table (gateway/auth/signature-header.test.ts); end to end, one
    // malformed case per parameter shows the gateway answers what the parser says.
    it("answers 401 INVALID_SIGNATURE to a malformed parameter, even when the signature covers it", async () => {
      const t = await tenant();
      const s = (opts: Parameters<typeof sign>[3] = {}) => sign(t.signer, "GET", "/v1/replays", opts);
      const dup = s();
      const cases: [string, string][] = [
        ["ts with a unit", authorization(s({ ts: `${Date.now()}ms` }))],
        ["nonce of 15 characters", authorization(s({ nonce: "a".repeat(15) }))],
        ["kid missing", authorization(omit(s(), "kid"))],
        ["sig empty", authorization({ ...s(), sig: "" })],
        ["tenant not a UUID", authorization(s({ tenant: "not-a-uuid" }))],
        ["nonce repeated", authorization([...Object.entries(dup), ["nonce", newNonce()]] as [string, string][])],
      ];
      for (const [name, header] of cases) {
        expectProblem(await call(url0, "GET", "/v1/replays", header), 401, "INVALID_SIGNATURE", `${name}: ${header}`);
      }
    });

    it("accepts nonces of 16 and 64 characters of [A-Za-z0-9_-]", async () => {
      const t = await tenant();
      const base = randomBytes(48).toString("base64url");
      for (const nonce of [`_-${base.slice(0, 14)}`, `${base.slice(0, 60)}-__-`]) {
        const res = await call(
          url0,
          "GET",
          "/v1/replays",
          authorization(sign(t.signer, "GET", "/v1/replays", { nonce })),
        );
        expect(res.status, `${nonce} (${nonce.length}): ${res.text}`).toBe(200);
      }
    });

    it("answers 401 INVALID_SIGNATURE to an unknown kid, another tenant's kid, or an unknown tenant", async () => {
      const a = await tenant();
      const b = await tenant();
      const cases: [string, string][] = [
        [
          "unknown kid",
          authorization(sign(a.signer, "GET", "/v1/replays", { kid: `kid_${randomBytes(12).toString("hex")}` })),
        ],
        [
          "b's kid and secret with a's tenant",
          authorization(sign(b.signer, "GET", "/v1/replays", { tenant: a.tenantId })),
        ],
        [
          "a's kid and secret with b's tenant",
          authorization(sign(a.signer, "GET", "/v1/replays", { tenant: b.tenantId })),
        ],
        [
          "a's kid with an unknown tenant",
          authorization(sign(a.signer, "GET", "/v1/replays", { tenant: randomUUID() })),
        ],
        ["b's kid with a's secret", authorization(sign(a.signer, "GET", "/v1/replays", { kid: b.signer.kid }))],
      ];
      for (const [name, header] of cases) {
        expectProblem(await call(url0, "GET", "/v1/replays", header), 401, "INVALID_SIGNATURE", name);
      }
    });

    it("answers 401 INVALID_SIGNATURE to a wrong sig", async () => {
      const t = await tenant();
      const other = await tenant();
      const good = sign(t.signer, "GET", "/v1/replays");
      const flipped = `${good.sig.slice(0, -1)}${good.sig.endsWith("0") ? "1" : "0"}`;
      const cases: [string, Params][] = [
        ["another tenant's secret", sign(t.signer, "GET", "/v1/replays", { secret: other.signer.secret })],
        ["the secret with a character more", sign(t.signer, "GET", "/v1/replays", { secret: `${t.signer.secret}x` })],
        ["last hex digit changed", { ...good, sig: flipped }],
        ["upper-case hex", { ...good, sig: good.sig.toUpperCase() }],
        ["truncated", { ...good, sig: good.sig.slice(0, 63) }],
        ["one digit more", { ...good, sig: `${good.sig}0` }],
        ["all zeros", { ...good, sig: "0".repeat(64) }],
        ["sha256 of the canonical string without a key", { ...good, sig: sha256Hex(good.sig) }],
      ];
      for (const [name, params] of cases) {
        expectProblem(await call(url0, "GET", "/v1/replays", authorization(params)), 401, "INVALID_SIGNATURE", name);
      }
    });

    it("answers 401 INVALID_SIGNATURE when the body, query, path, method or a signed parameter differs from what was signed", async () => {
      const t = await tenant();
      const other = await tenant();
      const body = JSON.stringify({ url: "https://example.com/hook", events: ["asset.ready"] });
      const id = randomUUID();
      const cases: { name: string; method: string; target: string; body?: string; auth: string }[] = [];
      const signed = (method: string, target: string, opts: Parameters<typeof sign>[3] = {}) =>
        authorization(sign(t.signer, method, target, opts));
      cases.push(
        {
          name: "body changed",
          method: "POST",
          target: "/v1/webhooks",
          body: body.replace("asset.ready", "asset.failed"),
          auth: signed("POST", "/v1/webhooks", { body }),
        },
        {
          name: "body re-serialised",
          method: "POST",
          target: "/v1/webhooks",
          body: JSON.stringify(JSON.parse(body), null, 1),
          auth: signed("POST", "/v1/webhooks", { body }),
        },
        { name: "body added", method: "POST", target: "/v1/webhooks", body, auth: signed("POST", "/v1/webhooks") },
        {
          name: "body dropped",
          method: "POST",
          target: "/v1/webhooks",
          auth: signed("POST", "/v1/webhooks", { body }),
        },
        {
          name: "query value changed",
          method: "GET",
          target: "/v1/replays?page_size=6",
          auth: signed("GET", "/v1/replays?page_size=5"),
        },
        { name: "query added", method: "GET", target: "/v1/replays?page_size=5", auth: signed("GET", "/v1/replays") },
        { name: "query dropped", method: "GET", target: "/v1/replays", auth: signed("GET", "/v1/replays?page_size=5") },
        {
          name: "query name changed",
          method: "GET",
          target: "/v1/replays?x=5",
          auth: signed("GET", "/v1/replays?y=5"),
        },
        { name: "path changed", method: "GET", target: "/v1/webhooks", auth: signed("GET", "/v1/replays") },
        {
          name: "path id changed",
          method: "GET",
          target: `/v1/replays/${randomUUID()}`,
          auth: signed("GET", `/v1/replays/${id}`),
        },
        {
          name: "path id case changed",
          method: "GET",
          target: `/v1/replays/${id.toUpperCase()}`,
          auth: signed("GET", `/v1/replays/${id}`),
        },
        {
          name: "method changed (GET signed, POST sent)",
          method: "POST",
          target: "/v1/webhooks",
          auth: signed("GET", "/v1/webhooks"),
        },
        {
          name: "method changed (DELETE signed, GET sent)",
          method: "GET",
          target: `/v1/replays/${id}`,
          auth: signed("DELETE", `/v1/replays/${id}`),
        },
      );
      const base = sign(t.signer, "GET", "/v1/replays");
      cases.push(
        {
          name: "ts changed",
          method: "GET",
          target: "/v1/replays",
          auth: authorization({ ...base, ts: String(Number(base.ts) + 1) }),
        },
        {
          name: "nonce changed",
          method: "GET",
          target: "/v1/replays",
          auth: authorization({ ...base, nonce: newNonce() }),
        },
        {
          name: "tenant changed",
          method: "GET",
          target: "/v1/replays",
          auth: authorization({ ...base, tenant: other.tenantId }),
        },
        {
          name: "tenant letter case changed",
          method: "GET",
          target: "/v1/replays",
          auth: authorization({ ...base, tenant: base.tenant.toUpperCase() }),
        },
      );
      for (const c of cases) {
        expectProblem(await call(url0, c.method, c.target, c.auth, c.body), 401, "INVALID_SIGNATURE", c.name);
      }
    });

    it("canonicalises the query: order, repeated names, a literal +, and percent-encoding variants verify alike", async () => {
      const t = await tenant();
      // [query as sent, the canonical line decisions.md §2 gives for it]
      const cases: [string, string][] = [
        ["", ""],
        ["b=2&a=1", "a=1&b=2"],
        ["a=1&b=2", "a=1&b=2"],
        ["x=2&x=1&x=10", "x=1&x=10&x=2"],
        ["x=1&x=10&x=2", "x=1&x=10&x=2"],
        ["q=a+b", "q=a%2Bb"],
        ["q=a%2Bb", "q=a%2Bb"],
        ["q=a%2bb", "q=a%2Bb"],
        ["q=a%20b", "q=a%20b"],
        ["q=~", "q=~"],
        ["q=%7E", "q=~"],
        ["q=%7e", "q=~"],
        ["q=%41%2d%2E%5f", "q=A-._"],
        ["q=%c3%a9", "q=%C3%A9"],
        ["q=%C3%A9", "q=%C3%A9"],
        ["q=!*()", "q=%21%2A%28%29"],
        ["q=a%2Fb%3Fc", "q=a%2Fb%3Fc"],
        ["a%3Db=c", "a%3Db=c"],
        ["flag", "flag="],
        ["flag&a=1", "a=1&flag="],
        ["q=", "q="],
        ["page_size=5&zeta=1&alpha=2", "alpha=2&page_size=5&zeta=1"],
      ];
      for (const [sent, canonical] of cases) {
        expect(canonicalQuery(sent), `lib/signing canonicalQuery(${sent})`).toBe(canonical);
        const target = sent === "" ? "/v1/replays" : `/v1/replays?${sent}`;
        const res = await call(
          url0,
          "GET",
          target,
          authorization(sign(t.signer, "GET", "/v1/replays", { query: canonical })),
        );
        expect(res.status, `?${sent} signed as "${canonical}": ${res.text}`).toBe(200);
      }
      // Two spellings of one query: a signature made for one verifies for the other.
      const pairs: [string, string][] = [
        ["b=2&a=1", "a=1&b=2"],
        ["q=%7e&x=1&x=2", "x=2&q=~&x=1"],
        ["q=a+b", "q=a%2Bb"],
      ];
      for (const [signedAs, sentAs] of pairs) {
        const res = await call(
          url0,
          "GET",
          `/v1/replays?${sentAs}`,
          authorization(sign(t.signer, "GET", `/v1/replays?${signedAs}`)),
        );
        expect(res.status, `signed ?${signedAs}, sent ?${sentAs}: ${res.text}`).toBe(200);
      }
      // "+" is a literal plus: a signature that read it as a space does not verify.
      const asSpace = await call(
        url0,
        "GET",
        "/v1/replays?q=a+b",
        authorization(sign(t.signer, "GET", "/v1/replays", { query: "q=a%20b" })),
      );
      expectProblem(asSpace, 401, "INVALID_SIGNATURE", "+ signed as a space");
      // Unsorted or lower-case-hex canonical lines are not the canonical form.
      const unsorted = await call(
        url0,
        "GET",
        "/v1/replays?b=2&a=1",
        authorization(sign(t.signer, "GET", "/v1/replays", { query: "b=2&a=1" })),
      );
      expectProblem(unsorted, 401, "INVALID_SIGNATURE", "unsorted canonical query");
      const lowerHex = await call(
        url0,
        "GET",
        "/v1/replays?q=%c3%a9",
        authorization(sign(t.signer, "GET", "/v1/replays", { query: "q=%c3%a9" })),
      );
      expectProblem(lowerHex, 401, "INVALID_SIGNATURE", "lower-case hex in the canonical query");
      // A query that does not percent-decode cannot have been signed.
      const undecodable = await call(
        url0,
        "GET",
        "/v1/replays?q=%zz",
        authorization(sign(t.signer, "GET", "/v1/replays", { query: "q=%zz" })),
      );
      expectProblem(undecodable, 401, "INVALID_SIGNATURE", "undecodable query");
    });

    it("covers the body a signed GET carries: signed over another body it is INVALID_SIGNATURE", async () => {
      const t = await tenant();
      const body = Buffer.from("abc");
      const asEmpty = authorization(sign(t.signer, "GET", "/v1/replays"));
      const refused = await rawRequest(url0, "GET /v1/replays", [`Authorization: ${asEmpty}`], { body });
      expect(refused.status, refused.body).toBe(401);
      expect(JSON.parse(refused.body).code).toBe("INVALID_SIGNATURE");
      const covered = authorization(sign(t.signer, "GET", "/v1/replays", { body: "abc" }));
      const served = await rawRequest(url0, "GET /v1/replays", [`Authorization: ${covered}`], { body });
      expect(served.status, served.body).toBe(200);
    });

    it("answers 401 UNAUTHENTICATED to two Authorization header lines, on key and signed routes alike", async () => {
      const t = await tenant();
      const signed = authorization(sign(t.signer, "GET", "/v1/replays"));
      const cases: [string, string[]][] = [
        ["/v1/api/servers", [`Bearer ${t.key}`, `Bearer ${t.key}`]],
        ["/v1/api/servers", [`Bearer ${t.key}`, signed]],
        ["/v1/replays", [signed, signed]],
        ["/v1/replays", [signed, `Bearer ${t.key}`]],
      ];
      for (const [path, lines] of cases) {
        const res = await rawRequest(
          url0,
          `GET ${path}`,
          lines.map((line) => `Authorization: ${line}`),
        );
        expect(res.status, `${path} ${lines.join(" | ")}: ${res.body}`).toBe(401);
        expect(JSON.parse(res.body).code).toBe("UNAUTHENTICATED");
        expect(res.contentType).toMatch(/^application\/problem\+json/);
      }
      // One line of each still works.
      expect((await rawRequest(url0, "GET /v1/api/servers", [`Authorization: Bearer ${t.key}`])).status).toBe(200);
    });

    it("answers 401 REQUEST_EXPIRED when ts is more than 300 000 ms from server time, and accepts it inside the window", async () => {
      const t = await tenant();
      const now = Date.now();
      for (const ts of [now - 310_000, now + 310_000, now - 3_600_000, 0]) {
        const res = await call(url0, "GET", "/v1/replays", authorization(sign(t.signer, "GET", "/v1/replays", { ts })));
        expectProblem(res, 401, "REQUEST_EXPIRED", `ts ${ts - now} ms from now`);
      }
      // A plain decimal integer of any length is well formed; a 16- or 40-digit one is just far away.
      for (const ts of [`${now}0`, "9".repeat(40)]) {
        const res = await call(url0, "GET", "/v1/replays", authorization(sign(t.signer, "GET", "/v1/replays", { ts })));
        expectProblem(res, 401, "REQUEST_EXPIRED", `a ${ts.length}-digit ts`);
      }
      // Leading zeros are digits of a plain decimal integer (decisions.md §2): signed as sent, the
      // value decides the window.
      const zeros = `00${Date.now()}`;
      const accepted = await call(
        url0,
        "GET",
        "/v1/replays",
        authorization(sign(t.signer, "GET", "/v1/replays", { ts: zeros })),
      );
      expect(accepted.status, accepted.text).toBe(200);
      const far = `0${now - 310_000}`;
      expectProblem(
        await call(url0, "GET", "/v1/replays", authorization(sign(t.signer, "GET", "/v1/replays", { ts: far }))),
        401,
        "REQUEST_EXPIRED",
        "a far ts with a leading zero",
      );
      // The signature covers the ts as sent: the same value without its zeros is another string.
      const stripped = authorization({ ...sign(t.signer, "GET", "/v1/replays", { ts: zeros }), ts: zeros.slice(2) });
      expectProblem(await call(url0, "GET", "/v1/replays", stripped), 401, "INVALID_SIGNATURE");
      for (const offset of [-290_000, 290_000]) {
        const res = await call(
          url0,
          "GET",
          "/v1/replays",
          authorization(sign(t.signer, "GET", "/v1/replays", { ts: Date.now() + offset })),
        );
        expect(res.status, `ts ${offset} ms from now: ${res.text}`).toBe(200);
      }
    });

    it("answers 401 NONCE_REUSED to a second use of a nonce with the same kid, whatever else changed", async () => {
      const t = await tenant();
      const nonce = newNonce();
      const auth = authorization(sign(t.signer, "GET", "/v1/replays", { nonce }));
      expect((await call(url0, "GET", "/v1/replays", auth)).status).toBe(200);
      expectProblem(await call(url0, "GET", "/v1/replays", auth), 401, "NONCE_REUSED", "the same request again");
      const otherRequest = authorization(
        sign(t.signer, "GET", "/v1/replays?page_size=3", { nonce, ts: Date.now() + 1 }),
      );
      expectProblem(
        await call(url0, "GET", "/v1/replays?page_size=3", otherRequest),
        401,
        "NONCE_REUSED",
        "another request, same nonce",
      );
      const otherRoute = authorization(sign(t.signer, "GET", "/v1/webhooks", { nonce }));
      expectProblem(
        await call(url0, "GET", "/v1/webhooks", otherRoute),
        401,
        "NONCE_REUSED",
        "another route, same nonce",
      );
    });

    it("a nonce is used up per kid: the same nonce with another signing key is accepted", async () => {
      const t = await tenant();
      const other = await tenant();
      const second = await sys.admin.createSigningKey({ tenantId: t.tenantId });
      const nonce = newNonce();
      for (const signer of [t.signer, { tenant: t.tenantId, kid: second.kid, secret: second.secret }, other.signer]) {
        const res = await call(
          url0,
          "GET",
          "/v1/replays",
          authorization(sign(signer, "GET", "/v1/replays", { nonce })),
        );
        expect(res.status, `${signer.kid}: ${res.text}`).toBe(200);
      }
    });

    it.skipIf(oneReplica)(
      "the nonce check holds across gateway replicas: a request accepted by one is NONCE_REUSED on the other (needs two replicas)",
      async () => {
        const t = await tenant();
        const auth = authorization(sign(t.signer, "GET", "/v1/replays"));
        const first = await call(url0, "GET", "/v1/replays", auth);
        expect(first.status, first.text).toBe(200);
        expectProblem(await call(url1, "GET", "/v1/replays", auth), 401, "NONCE_REUSED", "replica 1 after replica 0");
        expectProblem(await call(url0, "GET", "/v1/replays", auth), 401, "NONCE_REUSED", "replica 0 again");

        const reverse = authorization(sign(t.signer, "GET", "/v1/replays"));
        expect((await call(url1, "GET", "/v1/replays", reverse)).status).toBe(200);
        expectProblem(
          await call(url0, "GET", "/v1/replays", reverse),
          401,
          "NONCE_REUSED",
          "replica 0 after replica 1",
        );
      },
    );

    it("one signed request sent concurrently (to every replica) is accepted exactly once", async () => {
      const t = await tenant();
      const auth = authorization(sign(t.signer, "GET", "/v1/replays"));
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          call(sys.gatewayUrls[i % sys.gatewayUrls.length] as string, "GET", "/v1/replays", auth),
        ),
      );
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      for (const res of results.filter((r) => r.status !== 200)) expectProblem(res, 401, "NONCE_REUSED");
    });

    it("only a request that passes every check uses up its nonce", async () => {
      const t = await tenant();
      const refusals: [string, (nonce: string) => string, string][] = [
        [
          "wrong sig",
          (nonce) => authorization(sign(t.signer, "GET", "/v1/replays", { nonce, secret: `${t.signer.secret}x` })),
          "INVALID_SIGNATURE",
        ],
        [
          "expired",
          (nonce) => authorization(sign(t.signer, "GET", "/v1/replays", { nonce, ts: Date.now() - 400_000 })),
          "REQUEST_EXPIRED",
        ],
        [
          "from the future",
          (nonce) => authorization(sign(t.signer, "GET", "/v1/replays", { nonce, ts: Date.now() + 400_000 })),
          "REQUEST_EXPIRED",
        ],
        [
          "missing tenant",
          (nonce) => authorization(omit(sign(t.signer, "GET", "/v1/replays", { nonce }), "tenant")),
          "MISSING_TENANT",
        ],
        [
          "unknown kid",
          (nonce) =>
            authorization(
              sign(t.signer, "GET", "/v1/replays", { nonce, kid: `kid_${randomBytes(12).toString("hex")}` }),
            ),
          "INVALID_SIGNATURE",
        ],
        [
          "malformed ts",
          (nonce) => authorization(sign(t.signer, "GET", "/v1/replays", { nonce, ts: "soon" })),
          "INVALID_SIGNATURE",
        ],
        [
          "tampered query",
          (nonce) => authorization(sign(t.signer, "GET", "/v1/replays?page_size=9", { nonce })),
          "INVALID_SIGNATURE",
        ],
      ];
      for (const [name, header, code] of refusals) {
        const nonce = newNonce();
        expectProblem(await call(url0, "GET", "/v1/replays", header(nonce)), 401, code, name);
        // The refusal left the nonce unused, on this replica and the other.
        const res = await call(
          url1,
          "GET",
          "/v1/replays",
          authorization(sign(t.signer, "GET", "/v1/replays", { nonce })),
        );
        expect(res.status, `after ${name}: ${res.text}`).toBe(200);
      }
      // A request that passes authentication uses its nonce up even when the route then refuses it.
      const nonce = newNonce();
      const refused = await call(
        url0,
        "GET",
        "/v1/replays?page_size=0",
        authorization(sign(t.signer, "GET", "/v1/replays?page_size=0", { nonce })),
      );
      expectProblem(refused, 400, "INVALID_PAGE_SIZE");
      const again = await call(
        url0,
        "GET",
        "/v1/replays",
        authorization(sign(t.signer, "GET", "/v1/replays", { nonce })),
      );
      expectProblem(again, 401, "NONCE_REUSED", "after a 400 past authentication");
    });

    it("runs the checks in the documented order: scheme, tenant, form, kid and sig, ts window, nonce", async () => {
      const t = await tenant();
      const expired = Date.now() - 400_000;
      const badKid = `kid_${randomBytes(12).toString("hex")}`;
      const used = newNonce();
      expect(
        (await call(url0, "GET", "/v1/replays", authorization(sign(t.signer, "GET", "/v1/replays", { nonce: used }))))
          .status,
      ).toBe(200);

      const cases: [string, string, string][] = [
        [
          "another scheme, no tenant and a malformed ts",
          authorization(omit(sign(t.signer, "GET", "/v1/replays", { ts: "x" }), "tenant"), {
            scheme: "AWS4-HMAC-SHA256",
          }),
          "UNAUTHENTICATED",
        ],
        [
          "no tenant and a malformed ts",
          authorization(omit(sign(t.signer, "GET", "/v1/replays", { ts: "x" }), "tenant")),
          "MISSING_TENANT",
        ],
        [
          "no tenant, no ts, empty sig",
          authorization({ ...omit(sign(t.signer, "GET", "/v1/replays"), "tenant", "ts"), sig: "" }),
          "MISSING_TENANT",
        ],
        [
          "no tenant and an expired ts",
          authorization(omit(sign(t.signer, "GET", "/v1/replays", { ts: expired }), "tenant")),
          "MISSING_TENANT",
        ],
        [
          "no tenant and an unknown kid",
          authorization(omit(sign(t.signer, "GET", "/v1/replays", { kid: badKid }), "tenant")),
          "MISSING_TENANT",
        ],
        [
          "a bad sig and an expired ts",
          authorization({ ...sign(t.signer, "GET", "/v1/replays", { ts: expired }), sig: "0".repeat(64) }),
          "INVALID_SIGNATURE",
        ],
        [
          "an unknown kid and an expired ts",
          authorization(sign(t.signer, "GET", "/v1/replays", { ts: expired, kid: badKid })),
          "INVALID_SIGNATURE",
        ],
        [
          "a malformed nonce and an expired ts",
          authorization(sign(t.signer, "GET", "/v1/replays", { ts: expired, nonce: "short" })),
          "INVALID_SIGNATURE",
        ],
        [
          "a bad sig and a used nonce",
          authorization({ ...sign(t.signer, "GET", "/v1/replays", { nonce: used }), sig: "0".repeat(64) }),
          "INVALID_SIGNATURE",
        ],
        [
          "another tenant's kid and a used nonce",
          authorization(sign(t.signer, "GET", "/v1/replays", { nonce: used, tenant: randomUUID() })),
          "INVALID_SIGNATURE",
        ],
        [
          "an expired ts and a used nonce",
          authorization(sign(t.signer, "GET", "/v1/replays", { ts: expired, nonce: used })),
          "REQUEST_EXPIRED",
        ],
      ];
      for (const [name, header, code] of cases) {
        expectProblem(await call(url0, "GET", "/v1/replays", header), 401, code, name);
      }
    });
  });

  describe("tenancy", () => {
    it("an API key sees only its own tenant's servers", async () => {
      const a = await tenant();
      const b = await tenant();
      const serverId = await seedServer(sys, a.bearer(), `only-a-${randomUUID().slice(0, 8)}`);
      const mine = await send(url0, "GET", "/v1/api/servers", { headers: a.bearer() });
      expect(mine.status, mine.text).toBe(200);
      expect(mine.body.servers.map((s: { id: string }) => s.id)).toEqual([serverId]);
      for (const url of sys.gatewayUrls) {
        const theirs = await send(url, "GET", "/v1/api/servers", { headers: b.bearer() });
        expect(theirs.status, theirs.text).toBe(200);
        expect(theirs.body).toEqual({ servers: [] });
      }
    });

    it("a signing key lists only its own tenant's replays", async () => {
      const a = await tenant();
      const b = await tenant();
      for (const t of [a, b]) {
        const res = await sendSigned(url0, t.signer, "GET", "/v1/replays");
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual(EMPTY_PAGE);
      }
    });

    it("tenant and actor override headers naming another tenant change nothing", async () => {
      const a = await tenant();
      const b = await tenant();
      const serverId = await seedServer(sys, a.bearer(), `a-${randomUUID().slice(0, 8)}`);
      const overrides = (victim: { tenantId: string; ownerId: string }) => ({
        "x-tenant-id": victim.tenantId,
        "x-tenant": victim.tenantId,
        "x-actor": victim.ownerId,
        "x-actor-id": victim.ownerId,
        "x-member-id": victim.ownerId,
        "x-replay-tenant": victim.tenantId,
        "x-forwarded-tenant": victim.tenantId,
      });

      const plainB = await send(url0, "GET", "/v1/api/servers", { headers: b.bearer() });
      const spoofedB = await send(url0, "GET", "/v1/api/servers", { headers: { ...b.bearer(), ...overrides(a) } });
      expect(plainB.body).toEqual({ servers: [] });
      expect({ status: spoofedB.status, body: spoofedB.body }).toEqual({ status: plainB.status, body: plainB.body });

      const plainA = await send(url0, "GET", "/v1/api/servers", { headers: a.bearer() });
      const spoofedA = await send(url0, "GET", "/v1/api/servers", { headers: { ...a.bearer(), ...overrides(b) } });
      expect(plainA.body.servers.map((s: { id: string }) => s.id)).toEqual([serverId]);
      expect({ status: spoofedA.status, body: spoofedA.body }).toEqual({ status: plainA.status, body: plainA.body });

      const signedPlain = await sendSigned(url0, b.signer, "GET", "/v1/replays");
      const signedSpoofed = await sendSigned(url1, b.signer, "GET", "/v1/replays", { headers: overrides(a) });
      expect({ status: signedSpoofed.status, body: signedSpoofed.body }).toEqual({
        status: signedPlain.status,
        body: signedPlain.body,
      });

      // Without credentials the override headers authenticate nothing.
      expectProblem(await send(url0, "GET", "/v1/api/servers", { headers: overrides(a) }), 401, "UNAUTHENTICATED");
      expectProblem(await send(url0, "GET", "/v1/replays", { headers: overrides(a) }), 401, "UNAUTHENTICATED");
    });
  });
});
