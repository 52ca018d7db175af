// Request bodies on the public port: kept as raw bytes (signatures hash them, and JSON is parsed
// after authentication), held to the 64 KiB limit on every request, and a body over it answered
// 413 at once on the socket, its rest read and dropped.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { DomainError } from "../lib/errors.js";
import { httpRequests } from "../lib/metrics.js";
import type { Problem } from "../lib/problem.js";
import { rawProblemResponse, turnOf } from "./http1.js";
import { accessLog, routeLabel } from "./observe.js";
import { sendProblem } from "./problem.js";

/**
 * Bodies stay raw bytes: signatures hash them, and JSON is parsed after authentication so that a
 * malformed body never answers before a 401 (the 413 size check still comes first).
 */
export function keepBodiesRaw(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
}

export function hasBody(raw: FastifyRequest["raw"]): boolean {
  const length = raw.headers["content-length"];
  return raw.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** The whole body, or PAYLOAD_TOO_LARGE as soon as it is known to exceed `limit` (the error handler discards the rest). */
export async function readBounded(raw: FastifyRequest["raw"], limit: number): Promise<Buffer> {
  const tooLarge = () => new DomainError("PAYLOAD_TOO_LARGE", `the request body is larger than ${limit} bytes`);
  if (Number(raw.headers["content-length"] ?? 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of raw) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/**
 * 413 at once, however slowly the rest of the body comes, and close: written on the socket so the
 * answer does not wait for the body, but only in its turn, after the answers to the requests
 * pipelined before it. A client still uploading gets a short lingering read first, so that closing
 * does not reset the connection under it before it reads the 413.
 */
export async function refuseTooLarge(req: FastifyRequest, reply: FastifyReply, body: Problem): Promise<void> {
  // The connection: the response's socket, or (its turn not come yet) the request's, which a
  // request stream destroyed by an aborted read no longer holds.
  const connection = reply.raw.socket ?? req.raw.socket;
  if (!connection) return void (await sendProblem(req, reply, body));
  reply.hijack();
  const socket = await turnOf(reply.raw, connection);
  if (!socket) return;
  socket.write(rawProblemResponse(body, req.id));
  httpRequests.observe({ route: routeLabel(req), method: req.method, status: "413" }, reply.elapsedTime / 1000);
  accessLog.info(
    { method: req.method, route: req.routeOptions.url ?? null, status: 413, requestId: req.id },
    "request",
  );
  await discardBody(req.raw);
  socket.destroySoon();
}

const DISCARD_MAX_BYTES = 16 * 1024 * 1024;
const DISCARD_MAX_MS = 2_000;

/** Reads and drops what is left of a body, at most DISCARD_MAX_BYTES or DISCARD_MAX_MS of it. */
function discardBody(stream: FastifyRequest["raw"]): Promise<void> {
  if (stream.complete || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => {
      clearTimeout(timer);
      stream.off("data", count);
      stream.off("end", done);
      stream.off("error", done);
      resolve();
    };
    const count = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DISCARD_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DISCARD_MAX_MS);
    stream.on("data", count);
    stream.once("end", done);
    stream.once("error", done);
    stream.resume();
  });
}
