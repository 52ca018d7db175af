// The public REST gateway put together: Fastify with the port's limits, the hooks every request
// passes (its trace, the arrival checks, the record of its answer), the route table behind the
// guard, 405/404 from the table, and the API reference. Each job lives in its own file: limits.ts,
// request-checks.ts, body.ts, http1.ts (answers Fastify never sees), guard.ts, methods.ts,
// observe.ts, problem.ts.
import scalarApiReference from "@scalar/fastify-api-reference";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { DomainError } from "../lib/errors.js";
import { logger } from "../lib/log.js";
import type { Span, TraceContext } from "../lib/trace.js";
import { keepBodiesRaw, refuseTooLarge } from "./body.js";
import { DOCS_SCRIPT_PATH, type DocsScript, loadDocsScript, sendDocsScript } from "./docs-script.js";
import { type GuardDeps, guard } from "./guard.js";
import { answerClientError, answerOutsideFastify } from "./http1.js";
import { BODY_LIMIT_BYTES, type ConnectionLimits, DEFAULT_CONNECTION_LIMITS } from "./limits.js";
import { ALL_METHODS, knownPaths, notFound, refuseMethod, UNROUTED_PATHS } from "./methods.js";
import { recordResponse, startRequestSpan } from "./observe.js";
import { openApiDocument } from "./openapi/document.js";
import { isClientAbort, sendProblem, toProblem } from "./problem.js";
import { requestChecks } from "./request-checks.js";
import { requestIdFrom } from "./request-id.js";
import type { Route, RouteCall } from "./routes/route.js";
import { decodableUrl, originForm, splitUrl } from "./url.js";

const log = logger("gateway:http");

// Node caps the request line and headers at 16 KiB, so no id can be longer; a long id is refused by
// its route with the route's own code (INVALID_SERVER_ID, ...) after authentication, like any other.
const MAX_PARAM_LENGTH = 16 * 1024;

export type GatewayDeps = GuardDeps & {
  routes: readonly Route[];
  /** The dependencies that do not answer, by name (GET /readyz names them); none when ready. */
  notReady: () => Promise<string[]>;
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
  answerOutsideFastify(app.server, known, limits);
  keepBodiesRaw(app);

  app.addHook("onRequest", startRequestSpan);
  app.addHook("onRequest", requestChecks({ closing: () => closing, limits, known }));
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
  app.addHook("onResponse", recordResponse);

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    const missing = await deps.notReady().catch(() => ["readiness check"]);
    if (missing.length > 0) throw new DomainError("SERVICE_UNAVAILABLE", `not ready: ${missing.join(", ")}`);
    return reply.send({ status: "ready" });
  });
  registerApiReference(app, deps.routes);

  const methodsByPath = new Map<string, Set<string>>(UNROUTED_PATHS.map((path) => [path, new Set(["GET"])]));
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

/**
 * The API reference: the document built from the route table, and a page that renders it (its
 * script served from the package, so the page works with no outside network).
 */
function registerApiReference(app: FastifyInstance, routes: readonly Route[]): void {
  const openApi = JSON.stringify(openApiDocument(routes));
  app.get("/openapi.json", async (_req, reply) => reply.type("application/json").send(openApi));
  // The page's 3.5 MB script goes out from one Buffer (compressed once), never the plugin's string:
  // a string is copied into every response a slow reader has not taken yet.
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
}
