import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { type Actor, MemberRole } from "../gen/replay/common/v1/common_pb.js";
import type { Queryable } from "../lib/db/types.js";
import { DomainError } from "../lib/errors.js";
import { logger } from "../lib/log.js";
import type { Problem } from "../lib/problem.js";
import { trustedHeaders } from "../lib/rpc/context.js";
import type { Authenticator } from "./auth/authenticate.js";
import { toProblem } from "./problem.js";
import { type RateLimiter, rateLimitHeaders } from "./rate-limit.js";
import { isContextOverrideHeader, requestIdFrom } from "./request-id.js";
import type { Route, RouteCall } from "./routes/route.js";
import { findMemberById, type MemberRow } from "./store.js";

const log = logger("gateway:http");

/** decisions.md §1: "64 KiB" is 65 536 bytes, refused before authentication. */
export const BODY_LIMIT_BYTES = 65_536;
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

export type GatewayDeps = {
  routes: readonly Route[];
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  /** The identity database, for the member a management key is bound to. */
  db: Queryable;
  /** True when every dependency answers (GET /readyz). */
  isReady: () => Promise<boolean>;
  now: () => number;
  /** The deadline of the one RPC a request makes. */
  rpcTimeoutMs?: number;
};

declare module "fastify" {
  interface FastifyRequest {
    routeCall?: RouteCall;
  }
}

/** The public REST gateway. It never listens itself: main.ts does, tests inject. */
export function buildApp(deps: GatewayDeps): FastifyInstance {
  const app = Fastify({
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: (req) => requestIdFrom(req.headers["x-request-id"]),
    requestIdHeader: false,
    exposeHeadRoutes: false,
    return503OnClosing: true,
  });

  // Bodies stay raw bytes: signatures hash them, and JSON is parsed after authentication so that
  // a malformed body never answers before a 401 (the 413 size check still comes first).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  app.addHook("onRequest", async (req, reply) => {
    reply.header("x-request-id", req.id);
    for (const name of Object.keys(req.headers)) {
      if (isContextOverrideHeader(name)) delete req.headers[name];
    }
    // Fastify reads no body on GET and HEAD. One sent anyway is still held to the 64 KiB limit
    // (decisions.md §1: on every request) and is what a signature must cover.
    if ((req.method === "GET" || req.method === "HEAD") && hasBody(req.raw)) {
      const body = await readBounded(req.raw, BODY_LIMIT_BYTES);
      if (body.length > 0) req.body = body;
    }
  });

  app.setErrorHandler(async (err, req, reply) => {
    const body = toProblem(err);
    if (body.status >= 500) log.error({ err, requestId: req.id, url: req.url }, "request failed");
    // The upload is still arriving when an oversized body is refused; closing now would reset the
    // connection under the client before it reads the 413. Read and discard the rest, within bounds.
    if (body.code === "PAYLOAD_TOO_LARGE") await discardBody(req.raw);
    return sendProblem(req, reply, body);
  });
  app.setNotFoundHandler((req, reply) =>
    sendProblem(req, reply, toProblem(new DomainError("NOT_FOUND", `no route ${req.method} ${req.url.split("?")[0]}`))),
  );

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    if (!(await deps.isReady().catch(() => false))) {
      throw new DomainError("SERVICE_UNAVAILABLE", "a dependency is not reachable");
    }
    return reply.send({ status: "ready" });
  });

  const methodsByPath = new Map<string, Set<string>>([
    ["/healthz", new Set(["GET"])],
    ["/readyz", new Set(["GET"])],
  ]);
  for (const route of deps.routes) {
    methodsByPath.set(route.path, (methodsByPath.get(route.path) ?? new Set()).add(route.method));
    app.route({
      method: route.method,
      url: route.path,
      preHandler: (req, reply) => guard(deps, route, req, reply),
      handler: async (req, reply) => {
        const call = req.routeCall as RouteCall;
        const result = await route.handle(call);
        reply.code(result.status);
        if (result.body === undefined) return reply.send();
        return reply.type("application/json").send(JSON.stringify(result.body));
      },
    });
  }
  // A known path with another method is 405 with Allow, before authentication: it is a property of
  // the route table, not of the caller.
  for (const [path, allowed] of methodsByPath) {
    const others = ALL_METHODS.filter((method) => !allowed.has(method));
    app.route({
      method: others,
      url: path,
      handler: async (req, reply) => {
        reply.header("allow", [...allowed].join(", "));
        return sendProblem(
          req,
          reply,
          toProblem(
            new DomainError("METHOD_NOT_ALLOWED", `${req.method} is not allowed here; use ${[...allowed].join(", ")}`),
          ),
        );
      },
    });
  }
  return app;
}

function hasBody(raw: FastifyRequest["raw"]): boolean {
  const length = raw.headers["content-length"];
  return raw.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** The whole body, or PAYLOAD_TOO_LARGE as soon as it is known to exceed `limit` (the error handler discards the rest). */
async function readBounded(raw: FastifyRequest["raw"], limit: number): Promise<Buffer> {
  const tooLarge = () => new DomainError("PAYLOAD_TOO_LARGE", `the request body is larger than ${limit} bytes`);
  if (Number(raw.headers["content-length"] ?? 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

const DISCARD_MAX_BYTES = 16 * 1024 * 1024;
const DISCARD_MAX_MS = 5_000;

function discardBody(stream: FastifyRequest["raw"]): Promise<void> {
  if (stream.complete || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => {
      clearTimeout(timer);
      stream.off("data", count);
      stream.off("end", done);
      stream.off("error", done);
      resolve();
    };
    const count = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DISCARD_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DISCARD_MAX_MS);
    stream.on("data", count);
    stream.once("end", done);
    stream.once("error", done);
    stream.resume();
  });
}

function sendProblem(req: FastifyRequest, reply: FastifyReply, body: Problem) {
  return reply
    .code(body.status)
    .type("application/problem+json")
    .send(JSON.stringify({ ...body, instance: req.id }));
}

/**
 * decisions.md §3 "Order of checks on every /v1/api route": authentication (401), rate limit
 * (429), scope (403); the route's own validation follows in the handler and the service.
 */
async function guard(deps: GatewayDeps, route: Route, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const [path = "", rawQuery = ""] = splitUrl(req.url);
  const authorization = singleAuthorization(req.raw.rawHeaders);
  let tenantId: string;
  let memberId: string | null = null;
  if (route.auth === "api-key") {
    const identity = await deps.authenticator.apiKey(authorization);
    tenantId = identity.tenant_id;
    memberId = identity.member_id;
    const decision = deps.rateLimiter.take(
      tenantId,
      { rps: identity.rate_limit_rps, burst: identity.rate_limit_burst },
      deps.now(),
    );
    reply.headers(rateLimitHeaders(decision));
    if (!decision.allowed)
      throw new DomainError(
        "RATE_LIMITED",
        `the tenant's rate limit of ${identity.rate_limit_rps} requests/s is exhausted`,
      );
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
  const actor = route.actor && memberId ? toActor(await findMemberById(deps.db, memberId), memberId) : undefined;
  req.routeCall = {
    tenantId,
    actor,
    params: req.params as Record<string, string>,
    rawQuery,
    body: req.body as Buffer | undefined,
    headers: req.headers,
    rpc: { headers: trustedHeaders({ tenantId, actor, requestId: req.id }), timeoutMs: deps.rpcTimeoutMs ?? 10_000 },
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

function splitUrl(url: string): [string, string] {
  const at = url.indexOf("?");
  return at === -1 ? [url, ""] : [url.slice(0, at), url.slice(at + 1)];
}

const roles: Record<MemberRow["role"], MemberRole> = {
  owner: MemberRole.OWNER,
  admin: MemberRole.ADMIN,
  member: MemberRole.MEMBER,
  viewer: MemberRole.VIEWER,
};

/** The member as trusted context. A member row that vanished counts as removed. */
function toActor(member: MemberRow | undefined, memberId: string): Actor {
  return {
    $typeName: "replay.common.v1.Actor",
    memberId,
    role: member ? roles[member.role] : MemberRole.UNSPECIFIED,
    instanceSettings: member?.instance_settings ?? false,
    grantedCategoryIds: member?.granted_category_ids ?? [],
    grantedServerIds: member?.granted_server_ids ?? [],
    removed: member ? member.removed : true,
  };
}
