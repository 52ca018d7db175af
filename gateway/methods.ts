// Which methods each path of the route table allows: a known path with another method is 405 with
// Allow, an unknown path 404, both before authentication (a property of the route table, not of the
// caller).
import type { FastifyReply, FastifyRequest } from "fastify";
import { DomainError } from "../lib/errors.js";
import { sendProblem, toProblem } from "./problem.js";
import type { Route } from "./routes/route.js";
import { splitUrl } from "./url.js";

export const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/** The paths the gateway answers outside the route table, each with GET only. */
export const UNROUTED_PATHS = ["/healthz", "/readyz", "/openapi.json"] as const;

/** The methods of the route table's path that `path` matches, or undefined for an unknown path. */
export function knownPaths(routes: readonly Route[]): (path: string) => string[] | undefined {
  const patterns = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  const unrouted = UNROUTED_PATHS.map((path) => [path, "GET"]);
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

/** 405 with Allow: the path exists, the method does not; a property of the route table, before authentication. */
export function refuseMethod(req: FastifyRequest, reply: FastifyReply, allowed: readonly string[]) {
  reply.header("allow", allowed.join(", "));
  const detail = `${req.method} is not allowed here; use ${allowed.join(", ")}`;
  return sendProblem(req, reply, toProblem(new DomainError("METHOD_NOT_ALLOWED", detail)));
}

export function notFound(req: FastifyRequest): DomainError {
  return new DomainError("NOT_FOUND", `no route ${req.method} ${splitUrl(req.url)[0]}`);
}
