import { ALL_SCOPES, provisionTenant, type Res, send, sendSigned } from "./http.js";
import type { InProcessSystem } from "./in-process.js";

// A tenant for the route tests beside gateway/routes/: its requests, by key or signed, and keys
// that lack one scope.

/** A plan roomy enough that the rate limit never answers: route tests send many requests a second. */
const ROOMY = { rateLimitRps: 100_000, rateLimitBurst: 100_000 };

export type RequestOptions = { body?: unknown; rawBody?: string; headers?: Record<string, string>; key?: string };

/** A fresh tenant of `sys` (test/http.ts's provisionTenant) with the helpers the route tests share. */
export async function routeTenant(sys: InProcessSystem, plan: { serverLimit?: bigint } = {}) {
  const t = await provisionTenant(sys, { ...ROOMY, ...plan });
  /** A request with the tenant's all-scopes key, or with `key`. */
  const api = (method: string, path: string, opts: RequestOptions = {}): Promise<Res> =>
    send(sys.baseUrl, method, path, {
      body: opts.body,
      rawBody: opts.rawBody,
      headers: { ...t.bearer(opts.key), ...opts.headers },
    });
  /** A request signed with the tenant's signing key; `rawBody` sends those bytes instead of `body` as JSON. */
  const signed = (method: string, path: string, body?: unknown, rawBody?: string): Promise<Res> =>
    sendSigned(sys.baseUrl, t.signer, method, path, { body, rawBody });
  /** A key of the tenant's owner holding every scope but `scope`. */
  const keyWithout = async (scope: string): Promise<string> =>
    (await t.mintKey(ALL_SCOPES.filter((s) => s !== scope))).key;
  return { ...t, api, signed, keyWithout };
}

export type RouteTenant = Awaited<ReturnType<typeof routeTenant>>;
