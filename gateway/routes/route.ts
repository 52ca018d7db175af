import type { IncomingHttpHeaders } from "node:http";
import type { CallOptions } from "@connectrpc/connect";
import type { Actor } from "../../gen/replay/common/v1/common_pb.js";
import { DomainError, type ErrorCode } from "../../lib/errors.js";
import type { Scope } from "../auth/scopes.js";
import { nestsDeeperThan } from "./json.js";

/** What a route handler gets once the request is authenticated, rate-limited and scoped. */
export type RouteCall = {
  tenantId: string;
  /** The key's member, read fresh for this request; set only on routes with `actor: true`. */
  actor: Actor | undefined;
  params: Readonly<Record<string, string>>;
  rawQuery: string;
  body: Buffer | undefined;
  headers: IncomingHttpHeaders;
  /** Trusted context headers, deadline and cancellation for the one RPC the route makes. */
  rpc: CallOptions;
};

export type RouteReply = { status: number; body?: unknown };

/**
 * One public route: its authentication scheme and, for API-key routes, the scope it needs. The
 * table of all of them (routes/table.ts) is the whole public surface; 404 and 405 follow from it.
 */
export type Route = {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** find-my-way syntax: /v1/api/servers/:id */
  path: string;
  auth: "api-key" | "signature";
  scope?: Scope;
  /** Resolve the key's member fresh for this request (servers management). */
  actor?: boolean;
  /** What the API reference (GET /openapi.json) says of the route; the document is built from it. */
  doc: RouteDoc;
  handle(call: RouteCall): Promise<RouteReply>;
};

/**
 * Whether a request to the route takes a token of the tenant's rate limit: decisions.md §2 gives
 * the budget to the /v1/api routes, so the keyed webhook replay route and signed routes take none.
 */
export function isRateLimited(route: Pick<Route, "auth" | "path">): boolean {
  return route.auth === "api-key" && route.path.startsWith("/v1/api/");
}

/** A query parameter or request header a route reads. */
export type ParameterDoc = { name: string; description: string; schema: Record<string, unknown> };

/**
 * A route's entry in the API reference. Schemas are named components of gateway/openapi/schemas.ts.
 * `errors` are the codes the route itself can answer with; its authentication scheme's codes and
 * those every route can answer (INVALID_BODY, PAYLOAD_TOO_LARGE, INTERNAL_ERROR,
 * SERVICE_UNAVAILABLE) are added by the document.
 */
export type RouteDoc = {
  operationId: string;
  tag: "Timeline markers" | "Servers" | "Replays" | "Webhook subscriptions";
  summary: string;
  description?: string;
  /** What each path parameter is, by name (every one is an id). */
  pathParams?: Readonly<Record<string, string>>;
  query?: readonly ParameterDoc[];
  headers?: readonly ParameterDoc[];
  /** The JSON body the route reads. */
  requestBody?: string;
  /** The body may be left out (an empty object). */
  requestBodyOptional?: boolean;
  success: { status: number; description: string; schema?: string };
  errors: readonly ErrorCode[];
};

/**
 * JSON is UTF-8 (RFC 8259 §8.1): bytes that are not are a malformed body, not text to repair with
 * U+FFFD. A leading BOM stays, so JSON.parse refuses it as before.
 */
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * How deep a body may nest arrays and objects. The deepest contract body is 2 (a webhook
 * subscription's events); more is never a field we read, and a body nested thousands deep once
 * overflowed the stack of the Idempotency-Key fingerprint.
 */
export const MAX_JSON_DEPTH = 32;

/** The body as a JSON object, or INVALID_BODY (decisions.md §1: first in every validation order). */
export function readJsonObject(call: RouteCall): Record<string, unknown> {
  let value: unknown;
  try {
    const text = call.body ? utf8.decode(call.body) : "";
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      throw new DomainError("INVALID_BODY", `the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`);
    }
    value = JSON.parse(text);
  } catch (err) {
    if (err instanceof DomainError) throw err;
    throw new DomainError("INVALID_BODY", "the body is not valid JSON (UTF-8)");
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new DomainError("INVALID_BODY", "the body must be a JSON object");
  }
  return value as Record<string, unknown>;
}
