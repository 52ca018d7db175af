import {
  create,
  type DescMessage,
  type DescMethodStreaming,
  type DescMethodUnary,
  isMessage,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport, type UnaryResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { type Dispatcher, errors, Pool, util } from "undici";
import { decodeBinary } from "./binary-decoder.js";
import { encodeBinary } from "./binary-encoder.js";
import { EXCHANGE_HEADERS } from "./http-exchange.js";
import { keepByteOrderMarks } from "./text-encoding.js";

export type LeanTransportOptions = {
  baseUrl: string;
  /** Sent on every call (the internal token). */
  headers?: Record<string, string>;
  /** Calls beyond it queue. */
  connections?: number;
  defaultTimeoutMs?: number;
};

type HeaderInit = ConstructorParameters<typeof Headers>[0];

export type LeanTransport = Transport & { close(): Promise<void> };

/** The server enforces the deadline itself; this only guards against one that cannot answer at all. */
const DEADLINE_GRACE_MS = 1_000;

/**
 * Connect unary calls over HTTP/1.1 keep-alive, with no per-call AbortController, Headers or URL unless
 * asked for; errors as connect-node's would be. Streams go through connect-node's own transport.
 */
export function createLeanTransport(options: LeanTransportOptions): LeanTransport {
  keepByteOrderMarks();
  const origin = new URL(options.baseUrl);
  const prefix = origin.pathname.replace(/\/$/, "");
  const pool = new Pool(origin.origin, { connections: options.connections ?? 256 });
  const fixed = { "content-type": "application/proto", "connect-protocol-version": "1", ...options.headers };
  let streams: Transport | undefined;
  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeaderInit | undefined,
      input: MessageInitShape<I>,
    ): Promise<UnaryResponse<I, O>> {
      if (signal?.aborted) throw ConnectError.from(signal.reason, Code.Canceled);
      timeoutMs ??= options.defaultTimeoutMs;
      if (timeoutMs !== undefined && timeoutMs <= 0) {
        throw new ConnectError("the call's deadline passed", Code.DeadlineExceeded);
      }
      const message = isMessage(input, method.input) ? input : create(method.input, input);
      // Not `{ ...fixed }`: properties added to a spread clone take V8's slow path (docs/engineering.md).
      const headers: Record<string, string> = Object.assign({}, fixed);
      addHeaders(headers, header);
      if (timeoutMs !== undefined) headers["connect-timeout-ms"] = String(Math.ceil(timeoutMs));
      const waitMs = timeoutMs === undefined ? undefined : timeoutMs + DEADLINE_GRACE_MS;
      const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
      let res: Exchange;
      try {
        res = await exchange(
          pool,
          {
            path: `${prefix}/${method.parent.typeName}/${method.name}`,
            method: "POST",
            headers,
            body: encodeBinary(method.input, message),
            ...(waitMs === undefined ? {} : { headersTimeout: waitMs, bodyTimeout: waitMs }),
          },
          signal,
        );
      } catch (err) {
        throw transportError(err, signal);
      }
      const body = res.body;
      // An answer that comes after the deadline is no answer, as connect-node's client has it.
      if (deadline !== undefined && Date.now() >= deadline) {
        throw new ConnectError("the call's deadline passed", Code.DeadlineExceeded);
      }
      if (res.statusCode !== 200) throw errorOf(res.statusCode, res.headers, body);
      let output: UnaryResponse<I, O>["message"];
      try {
        output = decodeBinary(method.output, body);
      } catch (err) {
        throw new ConnectError(`parse binary: ${err instanceof Error ? err.message : err}`, Code.Internal);
      }
      return new LeanResponse(method, output, res.headers) as UnaryResponse<I, O>;
    },
    stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeaderInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
    ) {
      streams ??= createConnectTransport({
        baseUrl: options.baseUrl,
        httpVersion: "2",
        useBinaryFormat: true,
        acceptCompression: [],
      });
      const headers = new Headers(header);
      for (const [name, value] of Object.entries(options.headers ?? {})) headers.set(name, value);
      return streams.stream(method, signal, timeoutMs, headers, input);
    },
    close: () => pool.close(),
  };
}

type Exchange = { statusCode: number; headers: RawHeaders; body: Buffer };

/** Through undici's handler API, without `pool.request`'s Readable body and AsyncResource per call. */
function exchange(pool: Pool, options: Dispatcher.DispatchOptions, signal: AbortSignal | undefined): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    let abort: ((reason?: Error) => void) | undefined;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      abort?.(signal?.reason instanceof Error ? signal.reason : new errors.RequestAbortedError());
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const settle = () => signal?.removeEventListener("abort", onAbort);
    let statusCode = 0;
    let headers: RawHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    pool.dispatch(options, {
      onConnect(abortRequest) {
        abort = abortRequest;
        if (aborted) onAbort();
      },
      onHeaders(status, rawHeaders) {
        // An interim answer (1xx) is not the call's.
        if (status < 200) return true;
        statusCode = status;
        headers = util.parseHeaders(rawHeaders as Buffer[]);
        return true;
      },
      onData(chunk) {
        chunks.push(chunk);
        size += chunk.length;
        return true;
      },
      onComplete() {
        settle();
        resolve({
          statusCode,
          headers,
          body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size),
        });
      },
      onError(err) {
        settle();
        reject(err);
      },
    });
  });
}

function addHeaders(target: Record<string, string>, header: HeaderInit | undefined): void {
  if (header === undefined) return;
  if (header instanceof Headers || Array.isArray(header)) {
    new Headers(header).forEach((value, name) => {
      target[name] = value;
    });
    return;
  }
  for (const name in header) target[name.toLowerCase()] = header[name] as string;
}

type RawHeaders = Record<string, string | string[] | undefined>;

function splitTrailers(raw: RawHeaders): { header: Headers; trailer: Headers } {
  const header = new Headers();
  const trailer = new Headers();
  for (const name in raw) {
    if (EXCHANGE_HEADERS.has(name)) continue;
    const values = raw[name];
    for (const value of Array.isArray(values) ? values : [values ?? ""]) {
      if (name.startsWith("trailer-")) trailer.append(name.slice(8), value);
      else header.append(name, value);
    }
  }
  return { header, trailer };
}

/** Headers split on first read. A class, not a literal with getters (docs/engineering.md). */
class LeanResponse<I extends DescMessage, O extends DescMessage> {
  readonly stream = false;
  readonly service: DescMethodUnary<I, O>["parent"];
  readonly method: DescMethodUnary<I, O>;
  readonly message: UnaryResponse<I, O>["message"];
  private readonly raw: RawHeaders;
  private split: { header: Headers; trailer: Headers } | undefined;

  constructor(method: DescMethodUnary<I, O>, message: UnaryResponse<I, O>["message"], raw: RawHeaders) {
    this.service = method.parent;
    this.method = method;
    this.message = message;
    this.raw = raw;
  }

  get header(): Headers {
    return this.parts().header;
  }

  get trailer(): Headers {
    return this.parts().trailer;
  }

  private parts(): { header: Headers; trailer: Headers } {
    this.split ??= splitTrailers(this.raw);
    return this.split;
  }
}

function errorOf(status: number, raw: RawHeaders, body: Buffer): ConnectError {
  const { header, trailer } = splitTrailers(raw);
  trailer.forEach((value, name) => {
    header.append(name, value);
  });
  // Two fallbacks: errorFromJsonBytes adds the metadata to its own only once the body parsed as
  // JSON, so the one answered for an unparsable body carries it from the start.
  const fallback = new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status), header);
  try {
    return errorFromJsonBytes(body, header, new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status)));
  } catch {
    return fallback;
  }
}

/** The code a connect-node client would have given it. */
function transportError(err: unknown, signal: AbortSignal | undefined): ConnectError {
  if (err instanceof ConnectError) return err;
  if (signal?.aborted) return ConnectError.from(signal.reason, Code.Canceled);
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError) {
    return new ConnectError("the call's deadline passed", Code.DeadlineExceeded);
  }
  return new ConnectError(
    err instanceof Error ? err.message : String(err),
    Code.Unavailable,
    undefined,
    undefined,
    err,
  );
}
