import { create } from "@bufbuild/protobuf";
import { type ContextValues, createContextKey, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { type Actor, ActorSchema } from "../../gen/replay/common/v1/common_pb.js";
import { DomainError } from "../errors.js";
import { parseTraceparent, TRACEPARENT, type TraceContext } from "../trace.js";
import { decodeBinary } from "./binary-decoder.js";
import { encodeBinary } from "./binary-encoder.js";
import { headerValue } from "./http-exchange.js";

/**
 * Trusted request context. The gateway (or replayctl on the internal port) sets these headers on
 * the RPCs it makes; public clients never reach a service directly, and the gateway never forwards
 * a client's own headers, so nothing a public client sends can set them.
 */
export const contextHeaders = {
  tenant: "x-replay-tenant",
  actor: "x-replay-actor-bin",
  requestId: "x-request-id",
  traceparent: TRACEPARENT,
} as const;

export const kTenant = createContextKey<string | undefined>(undefined, { description: "tenant id" });
export const kActor = createContextKey<Actor | undefined>(undefined, { description: "acting member" });
export const kRequestId = createContextKey<string | undefined>(undefined, { description: "request id" });
export const kTraceParent = createContextKey<TraceContext | undefined>(undefined, {
  description: "caller's trace hop",
});
/** This server's own hop of the call, a child of the caller's (set by traceInterceptor). */
export const kTrace = createContextKey<TraceContext | undefined>(undefined, { description: "this call's trace hop" });

type HeaderSource = { headers: Record<string, string | string[] | undefined> };

/** Reads the trusted context headers of an incoming RPC (the node adapter's contextValues hook). */
export function readTrustedContext(req: HeaderSource): ContextValues {
  const values = createContextValues();
  const tenant = headerValue(req.headers[contextHeaders.tenant]);
  if (tenant) values.set(kTenant, tenant);
  const actor = headerValue(req.headers[contextHeaders.actor]);
  if (actor) values.set(kActor, decodeBinary(ActorSchema, Buffer.from(actor, "base64")));
  const requestId = headerValue(req.headers[contextHeaders.requestId]);
  if (requestId) values.set(kRequestId, requestId);
  const parent = parseTraceparent(headerValue(req.headers[contextHeaders.traceparent]));
  if (parent) values.set(kTraceParent, parent);
  return values;
}

/** Headers that carry a trusted context on an outgoing RPC. */
export function trustedHeaders(context: {
  tenantId?: string;
  actor?: Actor;
  requestId?: string;
  traceparent?: string;
}): Record<string, string> {
  const headers: Record<string, string> = {};
  if (context.tenantId) headers[contextHeaders.tenant] = context.tenantId;
  if (context.actor) {
    headers[contextHeaders.actor] = Buffer.from(encodeBinary(ActorSchema, create(ActorSchema, context.actor))).toString(
      "base64",
    );
  }
  if (context.requestId) headers[contextHeaders.requestId] = context.requestId;
  if (context.traceparent) headers[contextHeaders.traceparent] = context.traceparent;
  return headers;
}

/** The tenant of a tenant-scoped RPC; its absence is a caller bug, refused as UNAUTHENTICATED. */
export function requireTenant(ctx: HandlerContext): string {
  const tenant = ctx.values.get(kTenant);
  if (!tenant) throw new DomainError("UNAUTHENTICATED", "this call needs a tenant context");
  return tenant;
}

/**
 * The call's hop: what its handler hands on, to the transactions that enqueue events
 * (`db.transaction(fn, { trace: traceOf(ctx) })`) and in its log lines (traceLogFields).
 */
export function traceOf(ctx: { values: ContextValues }): TraceContext | undefined {
  return ctx.values.get(kTrace);
}

/** The acting member, when the caller's key is bound to one. */
export function actorOf(ctx: HandlerContext): Actor | undefined {
  return ctx.values.get(kActor);
}
