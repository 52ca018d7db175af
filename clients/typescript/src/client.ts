// createReplayClient: openapi-fetch over the generated route types, sending every request through
// the client's transport (authentication, safe retries, clock skew explained), with the paged
// lists as async iterators.
import createClient, { type Client } from "openapi-fetch";
import type { components, operations, paths } from "./openapi.js";
import { paged } from "./paging.js";
import type { RetryOptions } from "./retry.js";
import type { SigningKey } from "./signing.js";
import { gatewayOrigin, replayFetch } from "./transport.js";

export type ReplayClientOptions = {
  /** The gateway's public origin, e.g. http://127.0.0.1:8080 (a path is refused: see gatewayOrigin). */
  baseUrl: string;
  /** A developer API key (svc_live_…), sent as a bearer token on the /v1/api routes. */
  apiKey?: string;
  /** The tenant's signing key: the /v1/replays and /v1/webhooks routes are signed with it. */
  signingKey?: SigningKey;
  /**
   * Retries of requests that are safe to send again (GET, PUT, DELETE, and marker creates with an
   * Idempotency-Key) when the server answers 503 with Retry-After or 429, or the connection fails
   * before an answer: 3 attempts in all by default, waiting what the server asks (up to 30 s) with
   * a growing backoff. `false`: none. Invalid values throw a RangeError here.
   */
  retry?: RetryOptions | false;
  /** Marker creates without an Idempotency-Key get a random one, so that a retry cannot create two; true by default. */
  idempotencyKeys?: boolean;
  /** A fetch to use instead of the global one. */
  fetch?: (request: Request, init?: RequestInit) => Promise<Response>;
  /** The clock signatures are dated by, in Unix milliseconds; Date.now by default. */
  now?: () => number;
  /**
   * How long one attempt may take, to the end of its answer, before it is given up with
   * a TimeoutError (and retried when safe): 30 000 ms by default.
   */
  timeoutMs?: number;
};

export type ReplayListQuery = Omit<NonNullable<operations["listReplays"]["parameters"]["query"]>, "page_token">;
export type DeliveryListQuery = Omit<NonNullable<operations["listDeliveries"]["parameters"]["query"]>, "page_token">;
type Replay = components["schemas"]["ReplayMetadata"];
type Delivery = components["schemas"]["Delivery"];

export type ReplayClient = Client<paths> & {
  replays: {
    /**
     * Every replay of the tenant, newest first, page by page as the loop asks: the signed
     * GET /v1/replays with a signing key, else GET /v1/api/replays with the API key.
     */
    list(query?: ReplayListQuery): AsyncGenerator<Replay>;
  };
  webhooks: {
    /** A subscription's delivery log, newest first (signed GET /v1/webhooks/{id}/deliveries). */
    deliveries(subscriptionId: string, query?: DeliveryListQuery): AsyncGenerator<Delivery>;
  };
};

/** A typed client for every route of the public API (the paths of openapi.json). */
export function createReplayClient(options: ReplayClientOptions): ReplayClient {
  const client = createClient<paths>({ baseUrl: gatewayOrigin(options.baseUrl), fetch: replayFetch(options) });
  return Object.assign(client, {
    replays: {
      list: (query: ReplayListQuery = {}) =>
        paged((page_token) =>
          options.signingKey === undefined
            ? client.GET("/v1/api/replays", { params: { query: { ...query, page_token } } })
            : client.GET("/v1/replays", { params: { query: { ...query, page_token } } }),
        ),
    },
    webhooks: {
      deliveries: (id: string, query: DeliveryListQuery = {}) =>
        paged((page_token) =>
          client.GET("/v1/webhooks/{id}/deliveries", { params: { path: { id }, query: { ...query, page_token } } }),
        ),
    },
  });
}
