import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

/** A request and its response, on HTTP/1.1 or HTTP/2 (the compatibility API): the lean path serves both. */
export type HttpRequest = IncomingMessage | Http2ServerRequest;
export type HttpResponse = ServerResponse | Http2ServerResponse;

/** A request body: the request of either HTTP version, or an HTTP/2 stream with its headers apart. */
type BodySource = Readable & { headers?: IncomingHttpHeaders };

/**
 * Reads a whole request body of at most `maxBytes`. A larger one (declared or sent) is
 * `resource_exhausted`, as connect-node's readMaxBytes answers it; a body cut short by the caller
 * is `canceled`.
 */
export function readBody(
  req: BodySource,
  maxBytes: number,
  headers: IncomingHttpHeaders = req.headers ?? {},
): Promise<Buffer> {
  const declared = Number(headers["content-length"]);
  if (declared > maxBytes) return Promise.reject(tooLarge(maxBytes));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.off("data", onData);
        req.resume();
        reject(tooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)));
    const cutShort = () => reject(new ConnectError("the request body was cut short", Code.Canceled));
    req.once("error", cutShort);
    // An HTTP/2 stream the caller reset (CANCEL, NO_ERROR) closes with neither 'end' nor 'error'.
    req.once("close", cutShort);
  });
}

function tooLarge(maxBytes: number): ConnectError {
  return new ConnectError(`message larger than ${maxBytes} bytes`, Code.ResourceExhausted);
}

/**
 * Headers of the HTTP exchange itself, never a call's metadata: an error caught from a backend
 * carries its response's headers, which written into another response would break it.
 */
export const EXCHANGE_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "content-length",
  "content-type",
  "date",
  "keep-alive",
  "transfer-encoding",
]);

/** Headers (and Connect's `trailer-` prefixed trailers) as a plain object for writeHead. */
export function headerObject(
  target: Record<string, string>,
  headers: Headers | undefined,
  prefix = "",
): Record<string, string> {
  headers?.forEach((value, name) => {
    if (!EXCHANGE_HEADERS.has(name)) target[prefix + name] = value;
  });
  return target;
}

/** Whether the caller is still there to be answered. */
export function isAnswerable(res: HttpResponse): boolean {
  return !res.headersSent && !res.writableEnded && !res.destroyed;
}

/** The response side of an exchange, on either HTTP version, or an HTTP/2 stream itself. */
export type CallerExchange = {
  once(event: "close", listener: () => void): unknown;
  readonly headersSent: boolean;
  readonly closed?: boolean;
  readonly destroyed?: boolean;
  /** An HTTP/2 compatibility response's stream: the response itself has no `closed`. */
  readonly stream?: { readonly closed: boolean; readonly destroyed: boolean };
};

/**
 * Whether the exchange closed before its answer was begun: the caller reset its stream or
 * dropped its connection (an HTTP/2 stream reset by the caller counts as ended, so the headers
 * tell, not the writable side).
 */
export function isCallerGone(res: CallerExchange): boolean {
  const target = res.stream ?? res;
  return !res.headersSent && (target.closed === true || target.destroyed === true);
}

/**
 * Calls `listener` once if the exchange closes before its answer was begun, at once if it
 * already has (a handler may first ask for its signal after the caller left).
 */
export function onCallerGone(res: CallerExchange, listener: () => void): void {
  if (isCallerGone(res)) {
    listener();
    return;
  }
  res.once("close", () => {
    if (!res.headersSent) listener();
  });
}

/** The first value of a request header Node may have kept as a list. */
export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
