import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

export type HttpRequest = IncomingMessage | Http2ServerRequest;
export type HttpResponse = ServerResponse | Http2ServerResponse;

type BodySource = Readable & { headers?: IncomingHttpHeaders };

/** Larger than `maxBytes` (declared or sent): `resource_exhausted`, as connect-node; cut short: `canceled`. */
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

/** Never a call's metadata: a backend error's response headers, written into another response, break it. */
export const EXCHANGE_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "content-length",
  "content-type",
  "date",
  "keep-alive",
  "transfer-encoding",
]);

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

export function isAnswerable(res: HttpResponse): boolean {
  return !res.headersSent && !res.writableEnded && !res.destroyed;
}

export type CallerExchange = {
  once(event: "close", listener: () => void): unknown;
  readonly headersSent: boolean;
  readonly closed?: boolean;
  readonly destroyed?: boolean;
  /** The HTTP/2 compatibility response itself has no `closed`. */
  readonly stream?: { readonly closed: boolean; readonly destroyed: boolean };
};

/** Closed before its answer began; for a reset HTTP/2 stream the headers tell, not the writable side. */
export function isCallerGone(res: CallerExchange): boolean {
  const target = res.stream ?? res;
  return !res.headersSent && (target.closed === true || target.destroyed === true);
}

/** At once if the caller is gone already: a handler may first ask for its signal after the caller left. */
export function onCallerGone(res: CallerExchange, listener: () => void): void {
  if (isCallerGone(res)) {
    listener();
    return;
  }
  res.once("close", () => {
    if (!res.headersSent) listener();
  });
}

export function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
