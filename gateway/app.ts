import type { IncomingMessage, ServerResponse } from "node:http";
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
import { DOCS_SCRIPT_PATH, type DocsScript, loadDocsScript, sendDocsScript } from "./docs-script.js";
import { earlierAnswersWritten, mayAnswer, rawProblemResponse, turnOf } from "./http1.js";
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

/**
 * How long the public port waits on a client (docs/public-port.md). Every limit is one a client
 * that means well never meets; each closes a way to hold the process's memory or sockets for free.
 */
export type ConnectionLimits = {
  /** The request line and headers must have arrived within this of their first byte (Node's headersTimeout). */
  headersTimeoutMs: number;
  /**
   * The whole request, headers and a body of at most 64 KiB, must have arrived within this (Node's
   * requestTimeout, 0 in Fastify by default: a body trickled at a byte a second held a socket and
   * its buffers for as long as the client liked). 64 KiB in 30 s is 2 KiB/s, slower than any link.
   */
  requestTimeoutMs: number;
  /**
   * A connection on which nothing moves either way for this long while a request is open is cut
   * (the socket's inactivity timeout): above all a client that never reads its answers, whose
   * queued bytes would otherwise stay in memory forever. Longer than the 10 s RPC deadline, so a
   * request waiting on its backend is never cut; idle keep-alive connections have their own timeout.
   */
  stallTimeoutMs: number;
  /** How often Node checks the two request timeouts (default 30 s, which would let them run 30 s late). */
  checkIntervalMs: number;
  /**
   * Requests one connection may have in flight (pipelined, answers not yet written); the next is
   * answered 429 and the connection closed. Browsers do not pipeline at all.
   */
  maxInFlightPerConnection: number;
};

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 30_000,
  stallTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
  maxInFlightPerConnection: 16,
};

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
  /** DEFAULT_CONNECTION_LIMITS unless a test shortens them. */
  limits?: Partial<ConnectionLimits>;
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
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...deps.limits };
  const app = Fastify({
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: limits.requestTimeoutMs,
    connectionTimeout: limits.stallTimeoutMs,
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
      // Node's own answer to an HTTP/1.1 request without Host is an empty 400: onRequest refuses it
      // as a problem instead (hostProblem).
      requireHostHeader: false,
    },
    genReqId: (req) => requestIdFrom(req.headers["x-request-id"]),
    requestIdHeader: false,
    exposeHeadRoutes: false,
    // Fastify's own answers (JSON, no request id) are replaced by problems: the 503 while closing
    // in onRequest, a URL that does not percent-decode in rewriteUrl, the rest in frameworkErrors
    // and clientErrorHandler.
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    rewriteUrl: (req) => decodableUrl(originForm(req.url ?? "/")),
    frameworkErrors: (err, req, reply) => sendProblem(req, reply, toProblem(err)),
    clientErrorHandler: answerClientError,
  });
  app.addHook("preClose", async () => {
    closing = true;
  });
  const known = knownPaths(deps.routes);
  answerOutsideFastify(app, known, limits);
  const inFlight = new WeakMap<Socket, number>();

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
    const badHost = hostProblem(req.raw);
    if (badHost) {
      reply.header("connection", "close");
      throw new DomainError("INVALID_ARGUMENT", badHost);
    }
    // Pipelined requests whose answers are not written yet hold their responses in memory: a client
    // that sends many and reads none is stopped here (the stall timeout then cuts it).
    const socket = req.raw.socket;
    const pending = (inFlight.get(socket) ?? 0) + 1;
    inFlight.set(socket, pending);
    reply.raw.once("close", () => inFlight.set(socket, (inFlight.get(socket) ?? 1) - 1));
    if (pending > limits.maxInFlightPerConnection) {
      reply.header("connection", "close");
      throw new DomainError(
        "RATE_LIMITED",
        `more than ${limits.maxInFlightPerConnection} requests are waiting for their answers on this connection; read them first`,
      );
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
  // The page's 3.5 MB script goes out from one Buffer (compressed once), never the plugin's string:
  // a string is copied into every response a slow reader has not taken yet (issue 29: 300 unread
  // answers grew the process by 1 GB).
  const docsScript: Promise<DocsScript> = loadDocsScript();
  app.register(scalarApiReference, {
    routePrefix: "/docs",
    logLevel: "warn",
    hooks: {
      onRequest: async (req: FastifyRequest, reply: FastifyReply) => {
        if (req.routeOptions.url === DOCS_SCRIPT_PATH) return sendDocsScript(req, reply, await docsScript);
      },
    },
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

/**
 * The origin form of a request target (RFC 9112 §3.2): an absolute-form target
 * (`http://host/v1/replays?x=1`) names the same resource as its path and query, so it is routed and
 * signed as `/v1/replays?x=1`. Other targets are returned as they are.
 */
export function originForm(target: string): string {
  if (target.startsWith("/")) return target;
  const authority = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target);
  if (!authority) return target;
  const rest = target.slice(authority[0].length);
  return rest.startsWith("/") ? rest : `/${rest}`;
}

/**
 * Why the Host header of a request is refused, or undefined: RFC 9112 §3.2 answers 400 to an
 * HTTP/1.1 request without one and to any request with more than one.
 */
function hostProblem(raw: IncomingMessage): string | undefined {
  let count = 0;
  for (let i = 0; i < raw.rawHeaders.length; i += 2) if (raw.rawHeaders[i]?.toLowerCase() === "host") count++;
  if (count > 1) return "send one Host header";
  if (count === 0 && raw.httpVersion === "1.1") return "an HTTP/1.1 request needs a Host header";
  return undefined;
}

/**
 * What Node's HTTP/1.1 layer would answer itself, with an empty body or none: an Expect other than
 * 100-continue (its bare 417) and CONNECT (it closed the connection). Both become problems, after
 * the answers owed to earlier requests on the connection.
 */
function answerOutsideFastify(
  app: FastifyInstance,
  known: (path: string) => string[] | undefined,
  limits: ConnectionLimits,
): void {
  app.server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const id = requestIdFrom(req.headers["x-request-id"]);
    const detail = `Expect: ${req.headers.expect} is not an expectation this server meets; only 100-continue is`;
    const body = JSON.stringify({ ...problem("INVALID_ARGUMENT", detail), instance: id });
    // Its body, if any, is not read: the connection closes after the answer.
    res.writeHead(400, {
      "content-type": "application/problem+json",
      "content-length": Buffer.byteLength(body),
      "x-request-id": id,
      connection: "close",
    });
    res.end(body);
  });
  app.server.on("connect", (req: IncomingMessage, socket: Socket) => {
    // Node has taken its own listeners off this socket: without one, an error would crash the process.
    socket.on("error", () => socket.destroy());
    socket.setTimeout(limits.stallTimeoutMs, () => socket.destroy());
    const id = requestIdFrom(req.headers["x-request-id"]);
    // The same rule as any method outside the table: 405 on a known path, 404 elsewhere (an
    // authority-form target such as host:443 is never a path).
    const path = splitUrl(originForm(req.url ?? ""))[0];
    const allowed = known(path);
    const body = allowed
      ? problem("METHOD_NOT_ALLOWED", `CONNECT is not allowed here; use ${allowed.join(", ")}`)
      : problem("NOT_FOUND", `no route CONNECT ${path}`);
    void earlierAnswersWritten(socket).then((open) => {
      if (!open) return;
      socket.end(rawProblemResponse(body, id, allowed ? { allow: allowed.join(", ") } : {}));
    });
  });
}

const clientErrorDetails: Record<string, string> = {
  HPE_HEADER_OVERFLOW: "the request line and headers are larger than 16 KiB",
  ERR_HTTP_REQUEST_TIMEOUT: "the request did not arrive in time",
};

/** Connections already being answered for a broken request: more bytes after it break the parser again. */
const refusedConnections = new WeakSet<Socket>();

/**
 * Node's answer to a request it cannot parse (or that did not arrive in time), as a problem with a
 * request id, after the answers owed to the whole requests before it on the connection; then close.
 */
function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  if (refusedConnections.has(socket)) return;
  refusedConnections.add(socket);
  const id = requestIdFrom(undefined);
  const detail = clientErrorDetails[err.code ?? ""] ?? "the request is not valid HTTP/1.1";
  void earlierAnswersWritten(socket).then((open) => {
    if (!open || !mayAnswer(socket)) return void socket.destroy();
    socket.end(rawProblemResponse(problem("INVALID_ARGUMENT", detail), id));
  });
}

function isClientAbort(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" || code === "ECONNABORTED" || code === "ERR_STREAM_PREMATURE_CLOSE";
}

/**
 * 413 at once, however slowly the rest of the body comes, and close: written on the socket so the
 * answer does not wait for the body, but only in its turn, after the answers to the requests
 * pipelined before it. A client still uploading gets a short lingering read first, so that closing
 * does not reset the connection under it before it reads the 413.
 */
async function refuseTooLarge(req: FastifyRequest, reply: FastifyReply, body: Problem): Promise<void> {
  // The connection: the response's socket, or (its turn not come yet) the request's, which a
  // request stream destroyed by an aborted read no longer holds.
  const connection = reply.raw.socket ?? req.raw.socket;
  if (!connection) return void (await sendProblem(req, reply, body));
  reply.hijack();
  const socket = await turnOf(reply.raw, connection);
  if (!socket) return;
  socket.write(rawProblemResponse(body, req.id));
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
