import type { FastifyReply, FastifyRequest } from "fastify";
import type { Queryable } from "../lib/db/types.js";
import { DomainError } from "../lib/errors.js";
import { rateLimitRefusals } from "../lib/metrics.js";
import { trustedHeaders } from "../lib/rpc/context.js";
import { formatTraceparent } from "../lib/trace.js";
import { toActor } from "./actor.js";
import type { Authenticator } from "./auth/authenticate.js";
import { findMemberById } from "./identity/store.js";
import { type RateLimiter, rateLimitHeaders } from "./rate-limit.js";
import { escapeNul } from "./routes/json.js";
import { isRateLimited, type Route } from "./routes/route.js";
import { originForm, splitUrl } from "./url.js";

export type GuardDeps = {
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  /** The identity database, for the member a management key is bound to. */
  db: Queryable;
  now: () => number;
  /** The deadline of the one RPC a request makes (RPC_TIMEOUT_MS by default). */
  rpcTimeoutMs?: number;
};

/** The request deadline of decisions.md §1: a backend that has not answered by then is a 503. */
export const RPC_TIMEOUT_MS = 10_000;

/**
 * decisions.md §3 "Order of checks on every /v1/api route": authentication (401), rate limit
 * (429), scope (403); the route's own validation follows in the handler and the service. On
 * success the request carries its RouteCall: the tenant, the actor and the RPC's trusted headers.
 */
export async function guard(deps: GuardDeps, route: Route, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  // decisions.md §2 signs the path as sent; an absolute-form target is signed as its path (originForm).
  const [path, rawQuery] = splitUrl(originForm(req.originalUrl));
  const authorization = singleAuthorization(req.raw.rawHeaders);
  let tenantId: string;
  let memberId: string | null = null;
  if (route.auth === "api-key") {
    const identity = await deps.authenticator.apiKey(authorization);
    tenantId = identity.tenant_id;
    memberId = identity.member_id;
    if (isRateLimited(route)) {
      const decision = deps.rateLimiter.take(
        tenantId,
        { rps: identity.rate_limit_rps, burst: identity.rate_limit_burst },
        deps.now(),
      );
      reply.headers(rateLimitHeaders(decision));
      if (!decision.allowed) {
        rateLimitRefusals.inc({ route: route.path });
        throw new DomainError(
          "RATE_LIMITED",
          `the tenant's rate limit of ${identity.rate_limit_rps} requests/s is exhausted`,
        );
      }
    }
    if (route.scope && !identity.scopes.includes(route.scope)) {
      throw new DomainError("INSUFFICIENT_SCOPE", `this route needs the scope ${route.scope}`);
    }
  } else {
    tenantId = await deps.authenticator.signature({
      authorization,
      method: req.method,
      path,
      rawQuery,
      body: req.body as Buffer | undefined,
    });
  }
  if (req.badContentType) throw new DomainError("INVALID_BODY", "the Content-Type header is not a media type");
  const actor = route.actor && memberId ? toActor(await findMemberById(deps.db, memberId), memberId) : undefined;
  req.routeCall = {
    tenantId,
    actor,
    // Every path parameter is an id: one holding U+0000 goes on as sent, for its id code.
    params: Object.fromEntries(
      Object.entries(req.params as Record<string, string>).map(([name, value]) => [name, escapeNul(value)]),
    ),
    rawQuery,
    body: req.body as Buffer | undefined,
    headers: req.headers,
    rpc: {
      headers: trustedHeaders({
        tenantId,
        actor,
        requestId: req.id,
        traceparent: req.trace ? formatTraceparent(req.trace) : undefined,
      }),
      timeoutMs: deps.rpcTimeoutMs ?? RPC_TIMEOUT_MS,
    },
  };
}

/**
 * The one Authorization header of a request. Node keeps only the first of repeated header lines in
 * `req.headers`; two lines are two credentials, which decisions.md §2 refuses as UNAUTHENTICATED,
 * like two credentials in one line.
 */
function singleAuthorization(rawHeaders: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() !== "authorization") continue;
    if (value !== undefined) {
      throw new DomainError("UNAUTHENTICATED", "send one Authorization header with one credential");
    }
    value = rawHeaders[i + 1] ?? "";
  }
  return value;
}
