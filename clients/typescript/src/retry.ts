// When a request may be sent again, and after how long. Pure rules, so that they can be read and
// tested apart from the fetch loop (transport.ts) that follows them.

export type RetryOptions = {
  /** Attempts in all, the first included: 3 by default; 1 turns retrying off. */
  maxAttempts?: number;
  /** A wait the server asks for that is longer than this is not waited for: the answer is returned. 30 000 ms by default. */
  maxDelayMs?: number;
  /** The first backoff step, doubled on each further attempt: 500 ms by default. */
  baseDelayMs?: number;
};

export const DEFAULT_RETRY: Required<RetryOptions> = { maxAttempts: 3, maxDelayMs: 30_000, baseDelayMs: 500 };

/**
 * The options with the defaults filled in field by field (an `undefined` field keeps its default),
 * refused when a value would make the loop endless or a timer overflow (setTimeout holds at most
 * 2^31 - 1 ms, and fires at once past it).
 */
export function retryOptions(options: RetryOptions | false | undefined): Required<RetryOptions> {
  if (options === false) return { ...DEFAULT_RETRY, maxAttempts: 1 };
  const resolved = {
    maxAttempts: options?.maxAttempts ?? DEFAULT_RETRY.maxAttempts,
    maxDelayMs: options?.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs,
    baseDelayMs: options?.baseDelayMs ?? DEFAULT_RETRY.baseDelayMs,
  };
  if (!Number.isInteger(resolved.maxAttempts) || resolved.maxAttempts < 1 || resolved.maxAttempts > 100)
    throw new RangeError(`retry.maxAttempts must be an integer from 1 to 100, not ${resolved.maxAttempts}`);
  for (const name of ["maxDelayMs", "baseDelayMs"] as const) {
    const value = resolved[name];
    if (!Number.isFinite(value) || value < 0 || value > 2 ** 31 - 1)
      throw new RangeError(`retry.${name} must be from 0 to 2147483647 ms, not ${value}`);
  }
  return resolved;
}

/** RFC 9110's idempotent methods: sending one twice has the effect of sending it once. */
const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

/** The one write the API deduplicates by its `Idempotency-Key` (decisions.md §3). */
export const MARKER_CREATE_ROUTE = "/v1/api/timeline-events";

/**
 * Whether sending the request again can do no harm: an idempotent method, or a marker create
 * carrying an `Idempotency-Key`, which the server answers once. Any other write (creating a pending
 * setup, renaming a server, replaying a delivery) is never retried, a key on it included (the
 * server ignores it there): the first attempt may have taken effect whatever its answer says.
 */
export function isSafeToRetry(method: string, route: string, headers: Headers): boolean {
  const verb = method.toUpperCase();
  if (IDEMPOTENT_METHODS.has(verb)) return true;
  return verb === "POST" && route === MARKER_CREATE_ROUTE && headers.has("idempotency-key");
}

/**
 * The wait the server asked for, in milliseconds, when the answer is one worth retrying: a 503 with
 * `Retry-After` (a backend restarting), or a 429 (the tenant's rate limit) with `Retry-After` or,
 * failing that, the `t=` of its `RateLimit` header. Undefined for every other answer, a 503 without
 * `Retry-After` included (`WEBHOOK_DELIVERY_UNCONFIGURED` is a deployment's setting, not a moment).
 */
export function requestedDelayMs(response: Response, nowMs: number): number | undefined {
  if (response.status !== 503 && response.status !== 429) return undefined;
  const retryAfter = parseRetryAfter(response.headers.get("retry-after"), nowMs);
  if (retryAfter !== undefined) return retryAfter;
  if (response.status === 429) return parseRateLimitReset(response.headers.get("ratelimit"));
  return undefined;
}

/** `Retry-After` (RFC 9110 §10.2.3): whole seconds, or an HTTP date; undefined when absent or malformed. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP date always ends in GMT (RFC 9110 §5.6.7); Date.parse alone takes "-1" for a year.
  const at = /GMT$/.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** The `t=` seconds of a `RateLimit: "tenant";r=0;t=1` header (draft-ietf-httpapi-ratelimit-headers). */
export function parseRateLimitReset(value: string | null): number | undefined {
  const seconds = value === null ? undefined : /(?:^|;)\s*t=(\d+)/.exec(value)?.[1];
  return seconds === undefined ? undefined : Number(seconds) * 1000;
}

/**
 * How long to wait before attempt `attempt + 1` (attempt counts from 1): the longer of the server's
 * wait and an exponential backoff, lengthened by up to 20% (never shortened) so that clients refused
 * together do not all come back at the same instant, and never over `maxDelayMs` (the caller does
 * not retry when the server asks for more). `random` is in [0, 1).
 */
export function backoffDelayMs(
  attempt: number,
  requestedMs: number | undefined,
  options: Required<RetryOptions>,
  random: number,
): number {
  const backoff = options.baseDelayMs * 2 ** (attempt - 1);
  return Math.round(Math.min(options.maxDelayMs, Math.max(requestedMs ?? 0, backoff) * (1 + 0.2 * random)));
}
