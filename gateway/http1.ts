// The public port's answers that Fastify never sees: requests Node's HTTP/1.1 layer refuses or hands
// to an event (a parse error, a request timeout, CONNECT, an Expect it does not know), and the 413
// written on the socket. Each is a problem+json with an X-Request-Id, like every other answer, and
// each keeps HTTP/1.1's order on a pipelined connection: the answers owed to the requests before it
// go first, then this one, then the connection closes (RFC 9112 §9.3.2).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Problem } from "../lib/problem.js";

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
