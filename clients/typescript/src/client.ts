// createReplayClient: openapi-fetch over the generated route types, with the two authentication
// schemes of the contract built in as one middleware.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { paths } from "./openapi.js";
import { type SigningKey, signRequest } from "./signing.js";

export type ReplayClientOptions = {
  /** The gateway's public address, e.g. http://127.0.0.1:8080. */
  baseUrl: string;
  /** A developer API key (svc_live_…), sent as a bearer token on the /v1/api routes. */
  apiKey?: string;
  /** The tenant's signing key: the /v1/replays and /v1/webhooks routes are signed with it. */
  signingKey?: SigningKey;
  /** A fetch to use instead of the global one. */
  fetch?: typeof globalThis.fetch;
};

export type ReplayClient = Client<paths>;

/**
 * Which scheme a route takes, as the contract's security section says: routes under /v1/replays
 * and /v1/webhooks are signed, but the delivery replay, which takes a bearer key like /v1/api.
 */
export function isSignedPath(pathname: string): boolean {
  if (/^\/v1\/webhooks\/deliveries\/[^/]+\/replay$/.test(pathname)) return false;
  return /^\/v1\/(replays|webhooks)(\/|$)/.test(pathname);
}

/** Adds the Authorization header each route needs: a signature over the bytes sent, or the bearer key. */
function authMiddleware(options: ReplayClientOptions): Middleware {
  return {
    async onRequest({ request }) {
      const pathname = new URL(request.url).pathname;
      if (isSignedPath(pathname)) {
        if (options.signingKey === undefined) return request;
        // The body has been serialised by now: hash exactly those bytes, once, and send them as is.
        const body = request.body === null ? undefined : new Uint8Array(await request.clone().arrayBuffer());
        const { authorization } = signRequest({
          ...options.signingKey,
          method: request.method,
          url: request.url,
          body,
        });
        request.headers.set("authorization", authorization);
      } else if (options.apiKey !== undefined) {
        request.headers.set("authorization", `Bearer ${options.apiKey}`);
      }
      return request;
    },
  };
}

/** A typed client for every route of the public API (the paths of openapi.json). */
export function createReplayClient(options: ReplayClientOptions): ReplayClient {
  const client = createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, ""), fetch: options.fetch });
  client.use(authMiddleware(options));
  return client;
}
