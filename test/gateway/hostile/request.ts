import { canonicalQuery, canonicalString, hmacSha256Hex, sha256Hex } from "../../../lib/signing.js";
import type { Signer } from "../../http.js";
import type { Prng } from "./prng.js";
import { type Context, type RouteSchema, routeSchemas } from "./routes.js";
import { hostileQueryValue, hostileSegment, hostileString, prngUuid, wrongJson } from "./values.js";

/** One request as written on the wire; printed as it is when it breaks the contract. */
export type HostileRequest = {
  method: string;
  /** Path and query, exactly as sent. */
  target: string;
  headerLines: string[];
  body?: Buffer;
  chunked?: boolean;
  /** It carries no valid credential: it must never succeed. */
  forged: boolean;
};

export type Credentials = { key: string; signer: Signer };

const METHODS = ["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS", "TRACE", "QUERY", "PROPFIND", "FOO"];
const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "",
  ";;",
  "json",
  "application/",
  "text/plain",
  "application/json; charset=utf-16",
  "multipart/form-data; boundary=x",
  "application/problem+json",
];
const REQUEST_IDS = ["req-1", "x".repeat(128), "x".repeat(129), "has space", "ü", "", "\t"];

/** A request to a random route of the table, valid-ish or mutated in one or more ways. */
export function hostileRequest(ctx: Context, creds: Credentials): HostileRequest {
  const { prng } = ctx;
  const route = prng.pick(routeSchemas);
  const method = prng.chance(0.85) ? route.method : prng.pick(METHODS);
  const path = pathOf(route, ctx);
  const query = queryOf(route, ctx);
  const target = targetForm(prng, query === "" ? path : `${path}?${query}`);
  const body = bodyOf(route, method, ctx);
  const headerLines: string[] = [];
  if (body !== undefined && prng.chance(0.9)) headerLines.push(`Content-Type: ${contentType(prng)}`);
  if (prng.chance(0.05)) headerLines.push(`Content-Type: ${contentType(prng)}`);
  const [authorization, forged] = authLines(route, { method, path, query, body }, ctx, creds);
  headerLines.push(...authorization);
  if (prng.chance(0.2)) headerLines.push(`X-Request-Id: ${prng.pick(REQUEST_IDS)}`);
  if (prng.chance(0.05)) headerLines.push("X-Request-Id: a", "X-Request-Id: b");
  if (prng.chance(0.05)) headerLines.push(`X-Tenant-Id: ${prngUuid(prng)}`, "X-Actor-Role: owner");
  if (prng.chance(0.05)) headerLines.push(`Idempotency-Key: ${prng.pick(["k", "x".repeat(256), "ü", ""])}`);
  if (prng.chance(0.05)) {
    headerLines.push(
      prng.pick(["Expect: 100-continue", "Content-Encoding: gzip", "Accept: text/html", "Origin: null"]),
    );
  }
  return { method, target, headerLines, body, chunked: body !== undefined && prng.chance(0.1), forged };
}

/** Mostly origin-form; sometimes the other request-target forms of RFC 9112 §3.2, or none of them. */
function targetForm(prng: Prng, target: string): string {
  if (!prng.chance(0.05)) return target;
  return prng.pick([`http://127.0.0.1${target}`, "*", target.slice(1), `${target}#frag`, `${target}?`, `${target}&`]);
}

function pathOf(route: RouteSchema, ctx: Context): string {
  const { prng } = ctx;
  let path = route.path.replace(/:id/g, () => hostileSegment(prng, ctx.knownIds));
  if (prng.chance(0.03)) path = `${path}/`;
  if (prng.chance(0.03)) path = path.toUpperCase();
  if (prng.chance(0.02)) path = `${path}/extra`;
  if (prng.chance(0.02)) path = path.replace("/v1/", "//v1/");
  return path;
}

function queryOf(route: RouteSchema, ctx: Context): string {
  const { prng } = ctx;
  const pairs: string[] = [];
  for (const [name, valid] of Object.entries(route.query ?? {})) {
    if (!prng.chance(0.5)) continue;
    const value = prng.chance(0.6) ? valid(ctx) : hostileQueryValue(prng, () => valid(ctx));
    pairs.push(`${name}=${value}`);
    if (prng.chance(0.05)) pairs.push(`${name}=${valid(ctx)}`);
  }
  if (prng.chance(0.05)) pairs.push(prng.pick(["unknown=1", "%ZZ=1", "=", "&", "page_size"]));
  return pairs.join("&");
}

function bodyOf(route: RouteSchema, method: string, ctx: Context): Buffer | undefined {
  const { prng } = ctx;
  if (!route.body) return prng.chance(0.1) ? Buffer.from(prng.pick(["{}", "abc", '{"name":"x"}'])) : undefined;
  if (method === "GET" || method === "HEAD" ? !prng.chance(0.1) : prng.chance(0.03)) return undefined;
  if (prng.chance(0.15)) return wholeBodyMutation(prng);
  const members: string[] = [];
  for (const [name, valid] of Object.entries(route.body)) {
    if (!prng.chance(0.85)) continue;
    const roll = prng.next();
    const value =
      roll < 0.55 ? valid(ctx) : roll < 0.85 ? hostileString(prng, () => JSON.parse(valid(ctx))) : wrongJson(prng);
    members.push(`${JSON.stringify(name)}:${value}`);
    if (prng.chance(0.03)) members.push(`${JSON.stringify(name)}:${valid(ctx)}`);
  }
  if (prng.chance(0.1)) members.push(`${JSON.stringify(prng.pick(["id", "createdAt", "__proto__", "x"]))}:1`);
  return Buffer.from(`{${members.join(",")}}`);
}

function wholeBodyMutation(prng: Prng): Buffer {
  return prng.pick([
    () => Buffer.from(""),
    () => Buffer.from("{"),
    () => Buffer.from("null"),
    () => Buffer.from("[]"),
    () => Buffer.from('"name"'),
    () => Buffer.from('{"name":'),
    () => Buffer.from('\ufeff{"name":"x"}'),
    () => Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    () => Buffer.from(`{"name":"${"x".repeat(70_000)}"}`),
    () => Buffer.from("[".repeat(5000)),
    () => Buffer.from('{"name":1e400}'),
    () => Buffer.from(JSON.stringify({ name: "x" }).repeat(2)),
  ])();
}

function contentType(prng: Prng): string {
  return prng.pick(CONTENT_TYPES);
}

/** The Authorization lines, and whether they are no valid credential at all for the route. */
function authLines(route: RouteSchema, parts: Signable, ctx: Context, creds: Credentials): [string[], boolean] {
  const { prng } = ctx;
  const bearer = `Authorization: Bearer ${creds.key}`;
  const signed = () => `Authorization: ${signature(parts, creds.signer, prng)}`;
  const valid = route.auth === "api-key" ? bearer : signed();
  if (prng.chance(0.7)) return [[valid], false];
  return prng.pick<() => [string[], boolean]>([
    () => [[], true],
    () => [
      [`Authorization: ${prng.pick(["Bearer", "Bearer ", "bearer  x", "Basic eDp5", "Bearer svc_live_x"])}`],
      true,
    ],
    () => [[`Authorization: Bearer ${creds.key}, Bearer ${creds.key}`], true],
    () => [[valid, valid], true],
    () => [[route.auth === "api-key" ? signed() : bearer], true],
    () => {
      const [header, forged] = garbledSignature(parts, creds.signer, prng);
      return [[`Authorization: ${header}`], forged || route.auth === "api-key"];
    },
    () => [[`Authorization: Bearer ${creds.key.slice(0, -1)}${prng.pick(["\u00e9", "%", "-"])}`], true],
  ])();
}

/** What a signature covers of a request, as sent. */
type Signable = { method: string; path: string; query: string; body: Buffer | undefined };

function signature(
  { method, path, query, body }: Signable,
  signer: Signer,
  prng: Prng,
  ts: string = String(Date.now()),
): string {
  const nonce = Array.from({ length: 24 }, () => "abcdefghijklmnopqrstuvwxyz0123456789"[prng.int(36)]).join("");
  const canonical = canonicalString({
    tenant: signer.tenant,
    ts,
    nonce,
    kid: signer.kid,
    method: method.toUpperCase(),
    path,
    query: canonicalQuery(query) ?? "",
    bodySha256: sha256Hex(body ?? ""),
  });
  const sig = hmacSha256Hex(signer.secret, canonical);
  return `FV1-HMAC-SHA256 tenant=${signer.tenant},ts=${ts},nonce=${nonce},kid=${signer.kid},sig=${sig}`;
}

/** A signature header mangled one way, and whether it is forged (no valid credential). */
function garbledSignature(parts: Signable, signer: Signer, prng: Prng): [string, boolean] {
  const good = signature(parts, signer, prng);
  const sign = (ts: string) => signature(parts, signer, prng, ts);
  return prng.pick<() => [string, boolean]>([
    // decisions.md §2: leading zeros are digits, and scheme names match case-insensitively.
    () => [sign(`0${Date.now()}`), false],
    () => [good.replace("FV1-HMAC-SHA256", "fv1-hmac-sha256"), false],
    () => [sign("9".repeat(40)), true],
    () => [sign(String(Date.now() - 400_000)), true],
    () => [good.replace(/tenant=[^,]+,/, ""), true],
    () => [good.replace(/ts=\d+/, "ts=1.7e12"), true],
    () => [good.replace(/sig=[0-9a-f]+/, `sig=${"0".repeat(64)}`), true],
    () => [good.replace(/nonce=[^,]+/, "nonce=short"), true],
    () => [`${good},extra=1`, true],
    () => [`${good}, Bearer x`, true],
    () => ["FV1-HMAC-SHA256", true],
    () => [good.replace(/kid=[^,]+/, `kid=${prngUuid(prng)}`), true],
  ])();
}
