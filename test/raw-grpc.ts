import http2 from "node:http2";

/** What a gRPC server answered one raw call, and when. */
export type RawGrpcAnswer = {
  /** The HTTP status. */
  status: number | undefined;
  /** grpc-status and grpc-message, from the trailers, or from the headers of a trailers-only answer. */
  grpcStatus: string | undefined;
  grpcMessage: string | undefined;
  /** Whether the status came in the headers, with no body and no trailers (trailers-only). */
  trailersOnly: boolean;
  headers: http2.IncomingHttpHeaders;
  /** The response body's bytes. */
  body: Buffer;
  /** Milliseconds from sending the request to knowing its status (its trailers, or its trailers-only headers). */
  statusMs: number | undefined;
  /** The RST_STREAM code the stream closed with (0 NO_ERROR). */
  rstCode: number | undefined;
  /** Whether the stream was still open NO_ANSWER_MS after the request, and the helper cancelled it. */
  gaveUp: boolean;
};

/** How long a raw call may go unanswered before the helper gives up on it: a hang is a failure, not a wait. */
const NO_ANSWER_MS = 15_000;

/**
 * One gRPC call written by hand on a fresh HTTP/2 connection (node:http2, no gRPC library): the
 * headers given (a POST to `path`, content-type application/grpc, te: trailers, unless
 * overridden), then `body` as it is. With `end: false` the request stays open after the body, as
 * a client still sending would keep it. Resolves when the stream closes, or after NO_ANSWER_MS
 * with whatever came (`gaveUp`; statusMs undefined when no status came).
 */
export function rawGrpc(
  url: string,
  path: string,
  options: { headers?: http2.OutgoingHttpHeaders; body?: Buffer; end?: boolean } = {},
): Promise<RawGrpcAnswer> {
  return new Promise((resolve) => {
    const session = http2.connect(url);
    session.on("error", () => {});
    const started = performance.now();
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      ...options.headers,
    });
    const answer: RawGrpcAnswer = {
      status: undefined,
      grpcStatus: undefined,
      grpcMessage: undefined,
      trailersOnly: false,
      headers: {},
      body: Buffer.alloc(0),
      statusMs: undefined,
      rstCode: undefined,
      gaveUp: false,
    };
    const chunks: Buffer[] = [];
    const statusFrom = (headers: http2.IncomingHttpHeaders) => {
      if (headers["grpc-status"] === undefined || answer.grpcStatus !== undefined) return false;
      answer.grpcStatus = headers["grpc-status"] as string;
      answer.grpcMessage = headers["grpc-message"] as string | undefined;
      answer.statusMs = performance.now() - started;
      return true;
    };
    stream.on("response", (headers) => {
      answer.status = headers[":status"];
      answer.headers = headers;
      answer.trailersOnly = statusFrom(headers);
    });
    stream.on("trailers", (trailers) => statusFrom(trailers));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", () => {});
    const giveUp = setTimeout(() => {
      answer.gaveUp = true;
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, NO_ANSWER_MS);
    stream.on("close", () => {
      clearTimeout(giveUp);
      answer.body = Buffer.concat(chunks);
      answer.rstCode = stream.rstCode;
      session.destroy();
      resolve(answer);
    });
    if (options.body) stream.write(options.body);
    if (options.end !== false) stream.end();
  });
}

/** A gRPC length prefix: the flags byte (1 compressed) and a 4-byte big-endian length, of any value. */
export function grpcPrefix(flags: number, length: number): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flags;
  prefix.writeUInt32BE(length, 1);
  return prefix;
}

/** One gRPC message: its prefix and its bytes. */
export function grpcEnvelope(bytes: Uint8Array, flags = 0): Buffer {
  return Buffer.concat([grpcPrefix(flags, bytes.byteLength), bytes]);
}

/** The resident memory of the process behind an RPC port, in bytes, read from its GET /metrics. */
export async function rssOf(url: string, headers: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers })).text();
  const line = /^process_resident_memory_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
  if (!line) throw new Error(`no process_resident_memory_bytes in ${url}/metrics`);
  return Number(line[1]);
}
