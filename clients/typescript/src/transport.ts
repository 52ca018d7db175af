// The fetch every request of the client goes through: it authenticates each attempt (a signature
// over the exact bytes sent, with a fresh nonce, or the bearer key), retries what is safe to retry
// when the server asks for a wait, and explains a REQUEST_EXPIRED by the clock skew it shows.
import { randomUUID } from "node:crypto";
import { backoffDelayMs, DEFAULT_RETRY, isSafeToRetry, type RetryOptions, requestedDelayMs } from "./retry.js";
import { type SigningKey, signRequest } from "./signing.js";

export type TransportOptions = {
  /** The gateway's address; its path (when the API is behind a prefix) is not part of a route. */
  baseUrl: string;
  apiKey?: string;
  signingKey?: SigningKey;
  fetch?: (request: Request, init?: RequestInit) => Promise<Response>;
  /** Retries of safe requests on 503 + Retry-After and 429; `false` sends each request once. */
  retry?: RetryOptions | false;
  /** Marker creates without an Idempotency-Key get a random one, so that they can be retried; true by default. */
  idempotencyKeys?: boolean;
  /** The clock signatures are dated by, in Unix milliseconds; Date.now by default. */
  now?: () => number;
};

/**
 * Which scheme a route takes, as the contract's security section says: routes under /v1/replays
 * and /v1/webhooks are signed, but the delivery replay, which takes a bearer key like /v1/api.
 */
export function isSignedPath(pathname: string): boolean {
  if (/^\/v1\/webhooks\/deliveries\/[^/]+\/replay$/.test(pathname)) return false;
  return /^\/v1\/(replays|webhooks)(\/|$)/.test(pathname);
}

/** The route's part of a URL: its path without the base URL's own path. */
function routePath(url: string, basePath: string): string {
  const pathname = new URL(url).pathname;
  return pathname.startsWith(basePath) ? pathname.slice(basePath.length) : pathname;
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A REQUEST_EXPIRED problem with the skew between this machine's clock and the server's (by the
 * answer's Date header, to the second) in its detail and as `clock_skew_seconds`: the usual cause
 * is a clock that is off, which the bare code does not say. Any other answer is returned untouched.
 */
async function explainExpired(response: Response, nowMs: number): Promise<Response> {
  const serverMs = Date.parse(response.headers.get("date") ?? "");
  if (response.status !== 401 || Number.isNaN(serverMs)) return response;
  const text = await response.clone().text();
  let problem: { code?: unknown; detail?: unknown };
  try {
    problem = JSON.parse(text);
  } catch {
    return response;
  }
  if (problem.code !== "REQUEST_EXPIRED") return response;
  const skew = Math.round((nowMs - serverMs) / 1000);
  const detail = `${String(problem.detail)}: this machine's clock is ${Math.abs(skew)} s ${skew >= 0 ? "ahead of" : "behind"} the server's (by its Date header); signed requests must be dated within 300 s of it`;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  return new Response(JSON.stringify({ ...problem, detail, clock_skew_seconds: skew }), {
    status: response.status,
    statusText: response.statusText,
    headers,
  });
}

/** The fetch function the client hands openapi-fetch. */
export function replayFetch(options: TransportOptions) {
  const send = options.fetch ?? globalThis.fetch;
  const retry = options.retry === false ? { ...DEFAULT_RETRY, maxAttempts: 1 } : { ...DEFAULT_RETRY, ...options.retry };
  const now = options.now ?? Date.now;
  const basePath = new URL(options.baseUrl).pathname.replace(/\/+$/, "");

  /** The Authorization header one attempt needs: signed anew each time (a nonce is good once). */
  function authorize(headers: Headers, method: string, url: string, body: Uint8Array | undefined) {
    if (isSignedPath(routePath(url, basePath))) {
      if (options.signingKey === undefined) return;
      headers.set("authorization", signRequest({ ...options.signingKey, method, url, body, ts: now() }).authorization);
    } else if (options.apiKey !== undefined) {
      headers.set("authorization", `Bearer ${options.apiKey}`);
    }
  }

  return async (request: Request, init?: RequestInit): Promise<Response> => {
    // Read once: these bytes are hashed for the signature and sent as they are, on every attempt.
    const body = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer());
    const headers = new Headers(request.headers);
    const route = routePath(request.url, basePath);
    if (
      options.idempotencyKeys !== false &&
      request.method === "POST" &&
      route === "/v1/api/timeline-events" &&
      !headers.has("idempotency-key")
    ) {
      headers.set("idempotency-key", randomUUID());
    }
    const retryable = isSafeToRetry(request.method, headers);
    for (let attempt = 1; ; attempt++) {
      const attemptHeaders = new Headers(headers);
      authorize(attemptHeaders, request.method, request.url, body);
      const attemptRequest = new Request(request.url, {
        method: request.method,
        headers: attemptHeaders,
        body,
        signal: request.signal,
        redirect: request.redirect,
      });
      const last = !retryable || attempt >= retry.maxAttempts;
      let response: Response;
      try {
        response = await send(attemptRequest, init);
      } catch (err) {
        // No answer at all (refused, reset): safe requests try again after a backoff.
        if (last || request.signal.aborted) throw err;
        await sleep(backoffDelayMs(attempt, undefined, retry, Math.random()), request.signal);
        continue;
      }
      const requested = requestedDelayMs(response, now());
      if (last || requested === undefined || requested > retry.maxDelayMs) return explainExpired(response, now());
      await response.body?.cancel();
      await sleep(backoffDelayMs(attempt, requested, retry, Math.random()), request.signal);
    }
  };
}
