// The checks every request meets on arrival, before routing reads its body: the process draining,
// the Host header, pipelining, methods outside the route table, headers that would set the tenant
// or actor, a Content-Type that does not parse, and the body of a GET or HEAD.
import type { Socket } from "node:net";
import type { FastifyReply, FastifyRequest } from "fastify";
import { DomainError } from "../lib/errors.js";
import { hasBody, readBounded } from "./body.js";
import { hostProblem } from "./http1.js";
import { BODY_LIMIT_BYTES, type ConnectionLimits } from "./limits.js";
import { ALL_METHODS, notFound, refuseMethod } from "./methods.js";
import { isContextOverrideHeader } from "./request-id.js";
import { splitUrl } from "./url.js";

// RFC 9110 media type: type "/" subtype, then parameters.
const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*(;.*)?$/;

export type RequestCheckDeps = {
  /** True once the process has begun to close. */
  closing: () => boolean;
  limits: ConnectionLimits;
  /** The methods the route table allows on a path, or undefined for an unknown path. */
  known: (path: string) => string[] | undefined;
};

/** The onRequest hook that applies the checks; one per app (it counts each connection's requests in flight). */
export function requestChecks(deps: RequestCheckDeps) {
  const { limits, known } = deps;
  const inFlight = new WeakMap<Socket, number>();
  return async (req: FastifyRequest, reply: FastifyReply) => {
    reply.header("x-request-id", req.id);
    if (deps.closing()) {
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
  };
}
