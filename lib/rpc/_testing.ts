import { create, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import {
  type CallOptions,
  type Client,
  ConnectError,
  type ConnectRouter,
  createClient,
  createRouterTransport,
  type Interceptor,
} from "@connectrpc/connect";
import { ActorSchema } from "../../gen/replay/common/v1/common_pb.js";
import { kActor, kRequestId, kTenant, kTraceParent, readTrustedContext, trustedHeaders } from "./context.js";
import { contractCodeOf, errorInterceptor } from "./errors.js";

/**
 * Reads the trusted context headers into the call's context, as the service host's node adapter
 * does (its contextValues hook): an in-memory router has no such hook, and the headers are what the
 * gateway really sends.
 */
const trustedContextInterceptor: Interceptor = (next) => (req) => {
  const values = readTrustedContext({ headers: Object.fromEntries(req.header.entries()) });
  for (const key of [kTenant, kActor, kRequestId, kTraceParent] as const) {
    const value = values.get(key as typeof kTenant);
    if (value !== undefined) req.contextValues.set(key as typeof kTenant, value);
  }
  return next(req);
};

/**
 * A client of a service's handlers in this process: an in-memory router transport (no socket)
 * behind the service host's trusted context and its error mapping, so each call answers as it
 * would on the service's port.
 */
export function inMemoryClient<S extends DescService>(service: S, routes: (router: ConnectRouter) => void): Client<S> {
  return createClient(
    service,
    createRouterTransport(routes, { router: { interceptors: [trustedContextInterceptor, errorInterceptor] } }),
  );
}

/** The call options of a call made for `tenantId` by `actor`: the headers the gateway sends. */
export function asCaller(context: { tenantId?: string; actor?: MessageInitShape<typeof ActorSchema> }): CallOptions {
  const actor = context.actor === undefined ? undefined : create(ActorSchema, context.actor);
  return { headers: trustedHeaders({ tenantId: context.tenantId, actor }) };
}

/** The contract code a call fails with ("OK" when it answers), for tests of a service's refusals. */
export async function contractCodeOfCall(call: Promise<unknown>): Promise<string> {
  try {
    await call;
    return "OK";
  } catch (err) {
    const connectError = ConnectError.from(err);
    return contractCodeOf(connectError)?.code ?? `Code ${connectError.code}`;
  }
}
