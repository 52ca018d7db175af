// The fetch every request of the client goes through: it authenticates each attempt (a signature
// over the exact bytes sent, with a fresh nonce, or the bearer key), retries what is safe to retry
// when the server asks for a wait, and explains a REQUEST_EXPIRED by the clock skew it shows.
import { randomUUID } from "node:crypto";
import {
  backoffDelayMs,
  isSafeToRetry,
  MARKER_CREATE_ROUTE,
  type RetryOptions,
  requestedDelayMs,
  retryOptions,
} from "./retry.js";
import { type SigningKey, signRequest } from "./signing.js";

export type TransportOptions = {
  apiKey?: string;
  signingKey?: SigningKey;
  fetch?: (request: Request, init?: RequestInit) => Promise<Response>;
  /** Retries of safe requests on 503 + Retry-After and 429; `false` sends each request once. */
  retry?: RetryOptions | false;
  /** Marker creates without an Idempotency-Key get a random one, so that they can be retried; true by default. */
  idempotencyKeys?: boolean;
  /** The clock signatures are dated by, in Unix milliseconds; Date.now by default. */
  now?: () => number;
  /** How long one attempt may take before it is given up (and retried when safe); 30 000 ms by default. */
  timeoutMs?: number;
};

export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Which scheme a route takes, as the contract's security section says: routes under /v1/replays
 * and /v1/webhooks are signed, but the delivery replay, which takes a bearer key like /v1/api.
 */
export function isSignedPath(pathname: string): boolean {
  if (/^\/v1\/webhooks\/deliveries\/[^/]+\/replay$/.test(pathname)) return false;
  return /^\/v1\/(replays|webhooks)(\/|$)/.test(pathname);
}

/** Sent unless the caller sets its own, so that the gateway's logs tell this client's requests apart. */
export const USER_AGENT = "replay-client-typescript/0.1.0";

/**
 * The base URL as an origin. A path is refused: the signature covers the path as sent, so an API
 * behind a prefix that a proxy strips could never verify, and one it keeps is not a route.
 */
export function gatewayOrigin(baseUrl: string): string {
  const url = new URL(baseUrl);
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "")
    throw new TypeError(`baseUrl must be the gateway's origin (such as http://127.0.0.1:8080), not ${baseUrl}`);
  return url.origin;
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
 * Sends one attempt, made by `attempt` with its own deadline, which the caller's signal also ends. The deadline is
 * a controller held by its timer, listened to on the caller's own signal and handed to fetch itself: a signal that
 * a Request follows is followed through weak references, and after a garbage collection AbortSignal.any(...,
 * AbortSignal.timeout()) on a Request no longer fired, so a silent server held the caller for ever.
 */
async function sendWithDeadline(
  send: NonNullable<TransportOptions["fetch"]>,
  attempt: (signal: AbortSignal) => Request,
  caller: AbortSignal,
  init: RequestInit | undefined,
  timeoutMs: number,
): Promise<Response> {
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    timeoutMs,
  );
  const callerAborted = () => deadline.abort(caller.reason);
  if (caller.aborted) callerAborted();
  else caller.addEventListener("abort", callerAborted, { once: true });
  try {
    return await send(attempt(deadline.signal), { ...init, signal: deadline.signal });
  } finally {
    clearTimeout(timer);
    caller.removeEventListener("abort", callerAborted);
  }
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
  let problem: unknown;
  try {
    problem = JSON.parse(text);
  } catch {
    return response;
  }
  if (typeof problem !== "object" || problem === null || !("code" in problem) || problem.code !== "REQUEST_EXPIRED")
    return response;
  const skew = Math.round((nowMs - serverMs) / 1000);
  const detail = `${"detail" in problem ? String(problem.detail) : "request expired"}: this machine's clock is ${Math.abs(skew)} s ${skew >= 0 ? "ahead of" : "behind"} the server's (by its Date header); signed requests must be dated within 300 s of it`;
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
  const retry = retryOptions(options.retry);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 2 ** 31 - 1)
    throw new RangeError(`timeoutMs must be a whole number of milliseconds from 1 to 2147483647, not ${timeoutMs}`);
  // The signature's ts is a whole number of milliseconds: the gateway refuses any other.
  const now = () => Math.floor((options.now ?? Date.now)());

  /** The Authorization header one attempt needs: signed anew each time (a nonce is good once). */
  function authorize(headers: Headers, method: string, url: string, route: string, body: Uint8Array | undefined) {
    if (isSignedPath(route)) {
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
    const route = new URL(request.url).pathname;
    if (!headers.has("user-agent")) headers.set("user-agent", USER_AGENT);
    const markerCreate = request.method === "POST" && route === MARKER_CREATE_ROUTE;
    if (markerCreate && options.idempotencyKeys !== false && !headers.has("idempotency-key")) {
      headers.set("idempotency-key", randomUUID());
    }
    const retryable = isSafeToRetry(request.method, route, headers);
    for (let attempt = 1; ; attempt++) {
      const attemptHeaders = new Headers(headers);
      authorize(attemptHeaders, request.method, request.url, route, body);
      // From the request itself, so that what the call set (its signal, an undici dispatcher) holds
      // on every attempt. The API never redirects: a 3xx is returned, not followed with credentials
      // (and undici could not send these bytes again to a redirect's target anyway).
      // Each attempt has its own deadline (a gateway that never answers must not hold the caller for
      // undici's 300 s); the caller's signal still ends it, and the waits between attempts.
      const attemptRequest = (signal: AbortSignal) =>
        new Request(request, { headers: attemptHeaders, body, redirect: "manual", signal });
      const last = !retryable || attempt >= retry.maxAttempts;
      let response: Response;
      try {
        response = await sendWithDeadline(send, attemptRequest, request.signal, init, timeoutMs);
      } catch (err) {
        // No answer at all (refused, reset, timed out): safe requests try again after a backoff.
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
