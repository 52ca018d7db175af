import type { Socket } from "node:net";
import scalarApiReference from "@scalar/fastify-api-reference";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { type Actor, MemberRole } from "../gen/replay/common/v1/common_pb.js";
import type { Queryable } from "../lib/db/types.js";
import { DomainError } from "../lib/errors.js";
import { logger } from "../lib/log.js";
import { httpRequests, rateLimitRefusals } from "../lib/metrics.js";
import { type Problem, problem } from "../lib/problem.js";
import { trustedHeaders } from "../lib/rpc/context.js";
import { formatTraceparent, parseTraceparent, type Span, startSpan, type TraceContext } from "../lib/trace.js";
import type { Authenticator } from "./auth/authenticate.js";
import { openApiDocument } from "./openapi/document.js";
import { toProblem } from "./problem.js";
import { type RateLimiter, rateLimitHeaders } from "./rate-limit.js";
import { isContextOverrideHeader, requestIdFrom } from "./request-id.js";
import { escapeNul } from "./routes/json.js";
import { isRateLimited, type Route, type RouteCall } from "./routes/route.js";
import { findMemberById, type MemberRow } from "./store.js";

const log = logger("gateway:http");
const accessLog = logger("gateway:access");

/** decisions.md §1: "64 KiB" is 65 536 bytes, refused before authentication. */
export const BODY_LIMIT_BYTES = 65_536;
/** Retry-After on a 503 SERVICE_UNAVAILABLE: a replica restarts, or the pool reconnects, within seconds. */
const SERVICE_UNAVAILABLE_RETRY_AFTER_S = "1";
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
// Node caps the request line and headers at 16 KiB, so no id can be longer; a long id is refused by
// its route with the route's own code (INVALID_SERVER_ID, ...) after authentication, like any other.
const MAX_PARAM_LENGTH = 16 * 1024;
// RFC 9110 media type: type "/" subtype, then parameters.
const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*(;.*)?$/;

export type GatewayDeps = {
  routes: readonly Route[];
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  /** The identity database, for the member a management key is bound to. */
  db: Queryable;
  /** The dependencies that do not answer, by name (GET /readyz names them); none when ready. */
  notReady: () => Promise<string[]>;
  now: () => number;
  /** The deadline of the one RPC a request makes. */
  rpcTimeoutMs?: number;
};

declare module "fastify" {
  interface FastifyRequest {
    routeCall?: RouteCall;
    /** The body came with an empty or unparsable Content-Type: INVALID_BODY, after authentication. */
    badContentType?: boolean;
    /** This request's hop of its trace (lib/trace.ts). */
    trace?: TraceContext;
    /** Ends the hop's span when the response has gone. */
    endSpan?: Span["end"];
  }
}

/** The public REST gateway. It never listens itself: main.ts does, tests inject. */
export function buildApp(deps: GatewayDeps): FastifyInstance {
  let closing = false;
  const app = Fastify({
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: (req) => requestIdFrom(req.headers["x-request-id"]),
    requestIdHeader: false,
    exposeHeadRoutes: false,
    // Fastify's own answers (JSON, no request id) are replaced by problems: the 503 while closing
    // in onRequest, a URL that does not percent-decode in rewriteUrl, the rest in frameworkErrors
    // and clientErrorHandler.
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    rewriteUrl: (req) => decodableUrl(req.url ?? "/"),
    frameworkErrors: (err, req, reply) => sendProblem(req, reply, toProblem(err)),
    clientErrorHandler: answerClientError,
  });
  app.addHook("preClose", async () => {
    closing = true;
  });
  const known = knownPaths(deps.routes);

  // Bodies stay raw bytes: signatures hash them, and JSON is parsed after authentication so that
  // a malformed body never answers before a 401 (the 413 size check still comes first).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  // The request's hop of its trace (the client's traceparent, or a new trace), kept on the request
  // and passed explicitly: its log lines and its RPC carry it. Not an AsyncLocalStorage context,
  // which on Node 20 costs every promise of every request ~0.13 µs (async hooks): ~35 µs a request
  // here (lib/trace.ts).
  app.addHook("onRequest", (req, _reply, done) => {
    const route = routeLabel(req);
    const span = startSpan(`${req.method} ${route}`, "server", parseTraceparent(req.headers.traceparent), {
      requestId: req.id,
      attributes: { "http.request.method": req.method, "http.route": route },
    });
    req.trace = span.trace;
    req.endSpan = span.end;
    done();
  });
  app.addHook("onRequest", async (req, reply) => {
    reply.header("x-request-id", req.id);
    if (closing) {
      // Requests still arriving on open connections while the process drains: the load balancer
      // retries them elsewhere.
      reply.header("connection", "close");
      throw new DomainError("SERVICE_UNAVAILABLE", "this gateway is shutting down; retry");
    }
    // Methods outside the route table's (QUERY, TRACE, PROPFIND, ...) never reach body parsing.
    if (!(ALL_METHODS as readonly string[]).includes(req.method)) {
      const allowed = known(splitUrl(req.url)[0]);
      if (allowed) return refuseMethod(req, reply, allowed);
      throw notFound(req);
    }
    for (const name of Object.keys(req.headers)) {
      if (isContextOverrideHeader(name)) delete req.headers[name];
    }
    // Bodies are raw bytes whatever their type; one whose type does not parse is refused after
    // authentication (decisions.md's order), not by the parser before it.
    const contentType = req.headers["content-type"];
    if (contentType !== undefined && !MEDIA_TYPE.test(contentType)) {
      req.headers["content-type"] = "application/octet-stream";
      req.badContentType = hasBody(req.raw);
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
    const ids = { requestId: req.id, trace_id: req.trace?.traceId, url: req.url };
    if (body.status === 500) log.error({ err, ...ids }, "request failed");
    else if (body.status === 503) log.warn({ ...ids, reason: String(err) }, "request failed");
    else if (isClientAbort(err)) log.info(ids, "the client went away mid-request");
    if (body.code === "PAYLOAD_TOO_LARGE") return refuseTooLarge(req, reply, body);
    return sendProblem(req, reply, body);
  });
  app.setNotFoundHandler((req, reply) => {
    const allowed = known(splitUrl(req.url)[0]);
    if (allowed) return refuseMethod(req, reply, allowed);
    return sendProblem(req, reply, toProblem(notFound(req)));
  });
  app.addHook("onResponse", async (req, reply) => {
    req.endSpan?.(
      { "http.response.status_code": reply.statusCode },
      reply.statusCode >= 500 ? String(reply.statusCode) : undefined,
    );
    httpRequests.observe(
      { route: routeLabel(req), method: req.method, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    accessLog.info(
      {
        method: req.method,
        route: req.routeOptions.url ?? null,
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 10) / 10,
        tenant: req.routeCall?.tenantId ?? null,
        requestId: req.id,
        trace_id: req.trace?.traceId,
      },
      "request",
    );
  });

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    const missing = await deps.notReady().catch(() => ["readiness check"]);
    if (missing.length > 0) throw new DomainError("SERVICE_UNAVAILABLE", `not ready: ${missing.join(", ")}`);
    return reply.send({ status: "ready" });
  });

  // The API reference: the document built from the route table, and a page that renders it (its
  // script served from the package, so the page works with no outside network).
  const openApi = JSON.stringify(openApiDocument(deps.routes));
  app.get("/openapi.json", async (_req, reply) => reply.type("application/json").send(openApi));
  app.register(scalarApiReference, {
    routePrefix: "/docs",
    logLevel: "warn",
    configuration: {
      url: "/openapi.json",
      pageTitle: "Replay service API",
      withDefaultFonts: false,
      showDeveloperTools: "never",
      telemetry: false,
      agent: { disabled: true },
    },
  });

  const methodsByPath = new Map<string, Set<string>>([
    ["/healthz", new Set(["GET"])],
    ["/readyz", new Set(["GET"])],
    ["/openapi.json", new Set(["GET"])],
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
      handler: (req, reply) => refuseMethod(req, reply, [...allowed]),
    });
  }
  return app;
}

/** The metrics label of a request: its route pattern, never the path itself (ids would make it unbounded). */
function routeLabel(req: FastifyRequest): string {
  return req.routeOptions.url ?? "unmatched";
}

/** 405 with Allow: the path exists, the method does not; a property of the route table, before authentication. */
function refuseMethod(req: FastifyRequest, reply: FastifyReply, allowed: readonly string[]) {
  reply.header("allow", allowed.join(", "));
  const detail = `${req.method} is not allowed here; use ${allowed.join(", ")}`;
  return sendProblem(req, reply, toProblem(new DomainError("METHOD_NOT_ALLOWED", detail)));
}

function notFound(req: FastifyRequest): DomainError {
  return new DomainError("NOT_FOUND", `no route ${req.method} ${splitUrl(req.url)[0]}`);
}

/** The methods of the route table's path that `path` matches, or undefined for an unknown path. */
function knownPaths(routes: readonly Route[]): (path: string) => string[] | undefined {
  const patterns = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  const unrouted = [
    ["/healthz", "GET"],
    ["/readyz", "GET"],
    ["/openapi.json", "GET"],
  ];
  for (const [path, method] of [...routes.map((r) => [r.path, r.method]), ...unrouted]) {
    const key = path as string;
    const entry = patterns.get(key) ?? {
      // Literal but for the :params (the "." of /openapi.json is a dot, not any character).
      pattern: new RegExp(`^${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+")}$`),
      methods: new Set<string>(),
    };
    entry.methods.add(method as string);
    patterns.set(key, entry);
  }
  return (path) => {
    for (const { pattern, methods } of patterns.values()) if (pattern.test(path)) return [...methods];
    return undefined;
  };
}

/**
 * A path that does not percent-decode (`/v1/api/servers/%E0%A4%A`) is routed with its `%` taken
 * literally, so it meets the check order of any other request: 404 for an unknown path, and on a
 * known one authentication first, then the route's own id code. Signatures cover the original.
 */
function decodableUrl(url: string): string {
  const [path, query] = splitUrl(url);
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    return path.replaceAll("%", "%25") + (url.length > path.length ? `?${query}` : "");
  }
}

const clientErrorDetails: Record<string, string> = {
  HPE_HEADER_OVERFLOW: "the request line and headers are larger than 16 KiB",
  ERR_HTTP_REQUEST_TIMEOUT: "the request did not arrive in time",
};

/** Node's answer to a request it cannot parse, as a problem with a request id, then close. */
function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const id = requestIdFrom(undefined);
  const detail = clientErrorDetails[err.code ?? ""] ?? "the request is not valid HTTP/1.1";
  const body = JSON.stringify({ ...problem("INVALID_ARGUMENT", detail), instance: id });
  socket.end(
    `HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${id}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function isClientAbort(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "ECONNABORTED" || code === "ERR_STREAM_PREMATURE_CLOSE";
}

/**
 * 413 at once, however slowly the rest of the body comes, and close: written on the socket so the
 * answer does not wait for the body. A client still uploading gets a short lingering read first,
 * so that closing does not reset the connection under it before it reads the 413.
 */
async function refuseTooLarge(req: FastifyRequest, reply: FastifyReply, body: Problem): Promise<void> {
  // The response's socket: a request stream destroyed by an aborted read no longer holds it.
  const socket = reply.raw.socket ?? req.raw.socket;
  if (!socket) return void (await sendProblem(req, reply, body));
  reply.hijack();
  const text = JSON.stringify({ ...body, instance: req.id });
  socket.write(
    `HTTP/1.1 413 Content Too Large\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nx-request-id: ${req.id}\r\nconnection: close\r\n\r\n${text}`,
  );
  httpRequests.observe({ route: routeLabel(req), method: req.method, status: "413" }, reply.elapsedTime / 1000);
  accessLog.info(
    { method: req.method, route: req.routeOptions.url ?? null, status: 413, requestId: req.id },
    "request",
  );
  await discardBody(req.raw);
  socket.destroySoon();
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
const DISCARD_MAX_MS = 2_000;

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
  // A backend or the database away for a moment (a restart, a failover): the client may retry soon.
  if (body.code === "SERVICE_UNAVAILABLE") reply.header("retry-after", SERVICE_UNAVAILABLE_RETRY_AFTER_S);
  return reply
    .header("x-request-id", req.id)
    .code(body.status)
    .type("application/problem+json")
    .send(JSON.stringify({ ...body, instance: req.id }));
}

/**
 * decisions.md §3 "Order of checks on every /v1/api route": authentication (401), rate limit
 * (429), scope (403); the route's own validation follows in the handler and the service.
 */
async function guard(deps: GatewayDeps, route: Route, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const [path, rawQuery] = splitUrl(req.originalUrl);
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
      timeoutMs: deps.rpcTimeoutMs ?? 10_000,
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
