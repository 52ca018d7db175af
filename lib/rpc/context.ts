import { create } from "@bufbuild/protobuf";
import { type ContextValues, createContextKey, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { type Actor, ActorSchema } from "../../gen/replay/common/v1/common_pb.js";
import { DomainError } from "../errors.js";
import { parseTraceparent, TRACEPARENT, type TraceContext } from "../trace.js";
import { decodeBinary } from "./binary-decoder.js";
import { encodeBinary } from "./binary-encoder.js";
import { headerValue } from "./http-exchange.js";

/** Trusted: the gateway never forwards a client's own headers, and public clients never reach a service. */
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
/** A child of the caller's hop (set by traceInterceptor). */
export const kTrace = createContextKey<TraceContext | undefined>(undefined, { description: "this call's trace hop" });

type HeaderSource = { headers: Record<string, string | string[] | undefined> };

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

/** Its absence is a caller bug, refused as UNAUTHENTICATED. */
export function requireTenant(ctx: HandlerContext): string {
  const tenant = ctx.values.get(kTenant);
  if (!tenant) throw new DomainError("UNAUTHENTICATED", "this call needs a tenant context");
  return tenant;
}

/** What a handler hands to its transactions (`{ trace: traceOf(ctx) }`) and log lines. */
export function traceOf(ctx: { values: ContextValues }): TraceContext | undefined {
  return ctx.values.get(kTrace);
}

/** When the caller's key is bound to a member. */
export function actorOf(ctx: HandlerContext): Actor | undefined {
  return ctx.values.get(kActor);
}
