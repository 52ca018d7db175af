import { isIPv6 } from "node:net";
import { createSecureContext, rootCertificates } from "node:tls";
import { Agent, buildConnector } from "undici";
import { abortable, Deadline } from "./deadline.js";
import { parseRetryAfterMs } from "./retry-after.js";
import type { AttemptOutcome } from "./schedule.js";
import { deliveryHeaders } from "./signature.js";
import {
  type AllowTargets,
  describeBlocked,
  firstBlocked,
  type Resolver,
  resolveHost,
  systemResolver,
  targetKey,
} from "./target.js";

/** How much of a receiver's answer is read: enough to keep the connection, never a flood. */
export const RESPONSE_BODY_MAX_BYTES = 4096;

export type DeliveryRequest = {
  url: string;
  secret: string;
  /** While a rotation's overlap runs, the new secret (X-FV-Signature-Next). */
  nextSecret?: string | null;
  event: string;
  eventId: string;
  /** The JSON body exactly as it is sent and signed. */
  body: string;
};

export type AttemptResult = AttemptOutcome & {
  durationMs: number;
  /** No connection could be made to the receiver (refused, unreachable, connect timeout). */
  unreachable: boolean;
};

export type DeliveryClientOptions = {
  /** WEBHOOK_TIMEOUT_MS: the whole attempt, from resolving the host to the end of the answer. */
  timeoutMs: number;
  allowTargets: AllowTargets;
  /** WEBHOOK_CA_FILE's PEM text, trusted besides node's root certificates. */
  extraCaPem?: string | undefined;
  resolve?: Resolver;
  nowMs?: () => number;
};

export type DeliveryClient = AsyncDisposable & {
  /** One attempt: never throws; every failure is in the result's `error`. */
  send(request: DeliveryRequest): Promise<AttemptResult>;
  /** Whether the receiver takes a vetted TLS connection now, made as an attempt's is; no request is sent. */
  probe(url: string): Promise<boolean>;
  /** Waits for the attempts in flight, then closes every connection. */
  close(): Promise<void>;
  /** Cuts the attempts in flight without waiting, so their deliveries are handed back with no second sender. */
  destroy(): Promise<void>;
};

class BlockedAddressError extends Error {
  override name = "BlockedAddressError";
}

class UnresolvedHostError extends Error {
  override name = "UnresolvedHostError";
}

/**
 * The webhook delivery client (decisions.md §6). Each connection resolves once and connects to a vetted address
 * itself, so no second lookup can rebind the name to an internal address between vetting and connecting.
 */
export function createDeliveryClient(options: DeliveryClientOptions): DeliveryClient {
  const nowMs = options.nowMs ?? Date.now;
  // One secure context for all: a `ca` list in the connect options re-parses the root certificates per connection.
  const secureContext =
    options.extraCaPem === undefined
      ? undefined
      : createSecureContext({ ca: [...rootCertificates, options.extraCaPem] });
  const connectTls = buildConnector({ secureContext, timeout: options.timeoutMs });
  const connect = vettedConnector(
    connectTls,
    options.resolve ?? systemResolver,
    options.allowTargets,
    options.timeoutMs,
  );
  // No maxRedirections: undici follows no redirect unless told to, and a 3xx is a failed attempt.
  const agent = new Agent({
    connect,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  });

  async function send(request: DeliveryRequest): Promise<AttemptResult> {
    const started = performance.now();
    // Fields named one by one: spreads with more properties after them take V8's slow path.
    const result = (outcome: AttemptOutcome, unreachable = false): AttemptResult => ({
      statusCode: outcome.statusCode,
      error: outcome.error,
      retryAfterMs: outcome.retryAfterMs,
      durationMs: Math.round(performance.now() - started),
      unreachable,
    });
    const url = URL.canParse(request.url) ? new URL(request.url) : undefined;
    if (url?.protocol !== "https:") return result(failure(null, "url is not an https URL"));
    const signal = new Deadline(options.timeoutMs);
    const timestampS = Math.floor(nowMs() / 1000);
    try {
      // undici applies the signal only once connected; the race also times out a hung lookup or handshake.
      const res = await abortable(
        signal,
        agent.request({
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: "POST",
          headers: deliveryHeaders({
            event: request.event,
            eventId: request.eventId,
            secret: request.secret,
            nextSecret: request.nextSecret,
            body: request.body,
            timestampS,
          }),
          body: request.body,
          signal,
        }),
      );
      // Past the limit dump() destroys the connection, below it the connection is pooled; the signal cuts a trickle.
      await res.body.dump({ limit: RESPONSE_BODY_MAX_BYTES });
      if (signal.aborted) return result(failure(res.statusCode, "timeout"));
      return result(outcomeOf(res.statusCode, res.headers["retry-after"], nowMs()));
    } catch (err) {
      return result(failure(null, describeError(err)), isUnreachable(err));
    } finally {
      signal.clear();
    }
  }

  function probe(text: string): Promise<boolean> {
    const url = URL.canParse(text) ? new URL(text) : undefined;
    if (url?.protocol !== "https:") return Promise.resolve(false);
    return new Promise((resolve) => {
      connect(
        {
          protocol: "https:",
          hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
          host: url.host,
          port: url.port || "443",
          servername: undefined,
          localAddress: null,
          httpSocket: undefined,
        },
        (err, socket) => {
          socket?.destroy();
          resolve(err === null);
        },
      );
    });
  }

  const close = () => agent.close();
  return { send, probe, close, destroy: () => agent.destroy(), [Symbol.asyncDispose]: close };
}

function outcomeOf(statusCode: number, retryAfter: string | string[] | undefined, nowMs: number): AttemptOutcome {
  if (statusCode >= 200 && statusCode < 300) return { statusCode, error: null, retryAfterMs: null };
  if (statusCode >= 300 && statusCode < 400) return failure(statusCode, "redirect not followed");
  const retryAfterMs = statusCode === 429 || statusCode === 503 ? (parseRetryAfterMs(retryAfter, nowMs) ?? null) : null;
  return { statusCode, error: `HTTP ${statusCode}`, retryAfterMs };
}

function failure(statusCode: number | null, error: string): AttemptOutcome {
  return { statusCode, error, retryAfterMs: null };
}

const timeoutCodes = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
// Worth trying a host's next address: this one is unreachable, the next may not be.
const unreachableCodes = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ETIMEDOUT"]);

/** The attempt failed before any connection was made: the receiver is down or unreachable. */
function isUnreachable(err: unknown): boolean {
  const { code } = err as { code?: string };
  return code !== undefined && (unreachableCodes.has(code) || code === "UND_ERR_CONNECT_TIMEOUT");
}

/** The delivery log's `error` for an attempt that got no HTTP answer. */
function describeError(err: unknown): string {
  if (err instanceof BlockedAddressError || err instanceof UnresolvedHostError) return err.message;
  const { name, code, message } = err as { name?: string; code?: string; message?: string };
  if (name === "TimeoutError" || (code !== undefined && timeoutCodes.has(code))) return "timeout";
  // Node reports OpenSSL's verification failures by their names (DEPTH_ZERO_SELF_SIGNED_CERT, ...).
  if (code !== undefined && /^ERR_TLS|CERT|SSL|UNABLE_TO_VERIFY/.test(code)) return `TLS error: ${code}`;
  return `connection error: ${code ?? message ?? String(err)}`;
}

/** Connects only to vetted addresses; undici's `host` is kept, so TLS checks the certificate against the URL's name. */
function vettedConnector(connect: buildConnector.connector, resolve: Resolver, allow: AllowTargets, timeoutMs: number) {
  return (connectOptions: buildConnector.Options, callback: buildConnector.Callback): void => {
    const { hostname, port } = connectOptions;
    // A lookup cannot be cancelled, but the connection stops waiting for it.
    const deadline = new Deadline(timeoutMs);
    abortable(
      deadline,
      resolveHost(hostname, resolve).finally(() => deadline.clear()),
    ).then(
      (addresses) => {
        const urlHost = isIPv6(hostname) ? `[${hostname}]` : hostname;
        const blocked = allow.has(targetKey(urlHost, port)) ? undefined : firstBlocked(addresses);
        if (blocked) {
          callback(
            new BlockedAddressError(`blocked address: ${describeBlocked(blocked.address, blocked.reason)}`),
            null,
          );
          return;
        }
        const tryAddress = (index: number) => {
          connect({ ...connectOptions, hostname: addresses[index] ?? "" }, (...args) => {
            const [err] = args;
            const code = (err as { code?: string } | null)?.code;
            if (err && code !== undefined && unreachableCodes.has(code) && index + 1 < addresses.length) {
              tryAddress(index + 1);
              return;
            }
            callback(...args);
          });
        };
        tryAddress(0);
      },
      (err: unknown) => {
        if ((err as Error).name === "TimeoutError") {
          callback(err as Error, null);
          return;
        }
        const code = (err as { code?: string }).code ?? (err as Error).message;
        callback(new UnresolvedHostError(`DNS lookup of ${hostname} failed: ${code}`), null);
      },
    );
  };
}
