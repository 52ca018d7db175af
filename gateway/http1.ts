// The public port's answers that Fastify never sees: requests Node's HTTP/1.1 layer refuses or hands
// to an event (a parse error, a request timeout, CONNECT, an Expect it does not know), and the 413
// written on the socket. Each is a problem+json with an X-Request-Id, like every other answer, and
// each keeps HTTP/1.1's order on a pipelined connection: the answers owed to the requests before it
// go first, then this one, then the connection closes (RFC 9112 §9.3.2). Also HTTP/1.1's Host rule,
// which onRequest applies because Node is told not to (requireHostHeader: false answers an empty 400).
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { type Problem, problem } from "../lib/problem.js";
import type { ConnectionLimits } from "./limits.js";
import { requestIdFrom } from "./request-id.js";
import { originForm, splitUrl } from "./url.js";

/** A whole response with a problem body and `connection: close`, as bytes for the socket. */
export function rawProblemResponse(body: Problem, requestId: string, headers: Record<string, string> = {}): string {
  const text = JSON.stringify({ ...body, instance: requestId });
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  return (
    `HTTP/1.1 ${body.status} ${body.title}\r\ncontent-type: application/problem+json\r\n` +
    `content-length: ${Buffer.byteLength(text)}\r\nx-request-id: ${requestId}\r\n${extra}connection: close\r\n\r\n${text}`
  );
}

/** The response Node is writing on `socket` now (its own bookkeeping, which its clientError default reads too). */
function inFlight(socket: Socket): (ServerResponse & { req: IncomingMessage }) | undefined {
  return (socket as Socket & { _httpMessage?: ServerResponse & { req: IncomingMessage } })._httpMessage ?? undefined;
}

/**
 * Resolves once the answers to every request that arrived whole before the one that broke have
 * been written, to true; to false when the connection closed meanwhile. The request being read when
 * the bytes broke (its body cut short, its headers malformed) is the last: its own answer, if its
 * handler started one, is never waited for, since its body will never come.
 */
export async function earlierAnswersWritten(socket: Socket): Promise<boolean> {
  for (;;) {
    if (socket.destroyed) return false;
    const res = inFlight(socket);
    if (!res?.req.complete) return true;
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off("finish", done);
        res.off("close", done);
        socket.off("close", done);
        // Node hands the socket to the next queued response in its own 'finish' listener.
        setImmediate(resolve);
      };
      res.once("finish", done);
      res.once("close", done);
      socket.once("close", done);
    });
  }
}

/** True when `socket` may still take an answer: nothing of the response in flight (if any) written yet. */
export function mayAnswer(socket: Socket): boolean {
  const res = inFlight(socket);
  return socket.writable && !(res && !res.req.complete && res.headersSent);
}

/**
 * The socket `res` writes on once every earlier response on its connection is done (at once when
 * it is the first), or undefined when the connection closes before its turn.
 */
export function turnOf(res: ServerResponse, connection: Socket): Promise<Socket | undefined> {
  if (res.socket) return Promise.resolve(res.socket);
  if (connection.destroyed) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const assigned = (socket: Socket) => {
      connection.off("close", closed);
      resolve(socket);
    };
    const closed = () => {
      res.off("socket", assigned);
      resolve(undefined);
    };
    res.once("socket", assigned);
    connection.once("close", closed);
  });
}

/**
 * Why the Host header of a request is refused, or undefined: RFC 9112 §3.2 answers 400 to an
 * HTTP/1.1 request without one and to any request with more than one.
 */
export function hostProblem(raw: IncomingMessage): string | undefined {
  let count = 0;
  for (let i = 0; i < raw.rawHeaders.length; i += 2) if (raw.rawHeaders[i]?.toLowerCase() === "host") count++;
  if (count > 1) return "send one Host header";
  if (count === 0 && raw.httpVersion === "1.1") return "an HTTP/1.1 request needs a Host header";
  return undefined;
}

/**
 * What Node's HTTP/1.1 layer would answer itself, with an empty body or none: an Expect other than
 * 100-continue (its bare 417) and CONNECT (it closed the connection). Both become problems, after
 * the answers owed to earlier requests on the connection.
 */
export function answerOutsideFastify(
  server: Server,
  known: (path: string) => string[] | undefined,
  limits: ConnectionLimits,
): void {
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const id = requestIdFrom(req.headers["x-request-id"]);
    const detail = `Expect: ${req.headers.expect} is not an expectation this server meets; only 100-continue is`;
    const body = JSON.stringify({ ...problem("INVALID_ARGUMENT", detail), instance: id });
    // Its body, if any, is not read: the connection closes after the answer.
    res.writeHead(400, {
      "content-type": "application/problem+json",
      "content-length": Buffer.byteLength(body),
      "x-request-id": id,
      connection: "close",
    });
    res.end(body);
  });
  server.on("connect", (req: IncomingMessage, socket: Socket) => {
    // Node has taken its own listeners off this socket: without one, an error would crash the process.
    socket.on("error", () => socket.destroy());
    socket.setTimeout(limits.stallTimeoutMs, () => socket.destroy());
    const id = requestIdFrom(req.headers["x-request-id"]);
    // The same rule as any method outside the table: 405 on a known path, 404 elsewhere (an
    // authority-form target such as host:443 is never a path).
    const path = splitUrl(originForm(req.url ?? ""))[0];
    const allowed = known(path);
    const body = allowed
      ? problem("METHOD_NOT_ALLOWED", `CONNECT is not allowed here; use ${allowed.join(", ")}`)
      : problem("NOT_FOUND", `no route CONNECT ${path}`);
    void earlierAnswersWritten(socket).then((open) => {
      if (!open) return;
      socket.end(rawProblemResponse(body, id, allowed ? { allow: allowed.join(", ") } : {}));
    });
  });
}

const clientErrorDetails: Record<string, string> = {
  HPE_HEADER_OVERFLOW: "the request line and headers are larger than 16 KiB",
  ERR_HTTP_REQUEST_TIMEOUT: "the request did not arrive in time",
};

/** Connections already being answered for a broken request: more bytes after it break the parser again. */
const refusedConnections = new WeakSet<Socket>();

/**
 * Node's answer to a request it cannot parse (or that did not arrive in time), as a problem with a
 * request id, after the answers owed to the whole requests before it on the connection; then close.
 */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  if (refusedConnections.has(socket)) return;
  refusedConnections.add(socket);
  const id = requestIdFrom(undefined);
  const detail = clientErrorDetails[err.code ?? ""] ?? "the request is not valid HTTP/1.1";
  void earlierAnswersWritten(socket).then((open) => {
    if (!open || !mayAnswer(socket)) return void socket.destroy();
    socket.end(rawProblemResponse(problem("INVALID_ARGUMENT", detail), id));
  });
}
