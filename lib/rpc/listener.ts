import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { H2_LIMITS, type H2Limits, h2ServerOptions } from "./h2-limits.js";
import { guardSession, type SessionGuard } from "./h2-session-guard.js";
import type { HttpRequest, HttpResponse } from "./http-exchange.js";

/** Every HTTP/2 connection opens with this preface; no HTTP/1.x request line starts like it. */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0");

const SNIFF_TIMEOUT_MS = 30_000;

export type DualListener = {
  readonly server: net.Server;
  /** In-flight requests finish for up to `graceMs`, then every connection is cut. */
  close(graceMs: number): Promise<void>;
};

/** h2c (stock gRPC clients) and HTTP/1.1 keep-alive (the lean hop) on one port, told apart by the first bytes. */
export function createDualListener(
  onRequest: (req: HttpRequest, res: HttpResponse) => void,
  onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => boolean,
  limits: H2Limits = H2_LIMITS,
): DualListener {
  const h1 = http.createServer(onRequest);
  // No request listener: the compatibility objects are built only for streams `onStream` leaves.
  const h2 = http2.createServer(h2ServerOptions(limits));
  const sessions = new Map<http2.ServerHttp2Session, SessionGuard>();
  h2.on(
    "stream",
    (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
      sessions.get(stream.session as http2.ServerHttp2Session)?.onStream(stream);
      if (onStream(stream, headers)) return;
      const req = new http2.Http2ServerRequest(stream, headers, {}, rawHeaders);
      const res = new http2.Http2ServerResponse(stream);
      // What node's own compatibility layer does before its 'request' event (onServerStream).
      if (headers[":method"] === "CONNECT" || (headers.expect !== undefined && headers.expect !== "100-continue")) {
        res.statusCode = headers.expect === undefined ? 405 : 417;
        res.end();
        return;
      }
      if (headers.expect !== undefined) res.writeContinue();
      onRequest(req, res);
    },
  );
  h2.on("session", (session) => {
    sessions.set(session, guardSession(session, limits));
    session.on("close", () => sessions.delete(session));
  });
  const guard = setInterval(() => {
    const now = Date.now();
    for (const sessionGuard of sessions.values()) sessionGuard.check(now);
  }, limits.checkIntervalMs);
  guard.unref();
  let closing = false;
  // A response written while draining tells the HTTP/1.1 caller not to reuse the connection.
  h1.on("request", (_req, res: http.ServerResponse) => {
    if (closing) res.shouldKeepAlive = false;
  });
  const server = net.createServer((socket) => {
    let seen = Buffer.alloc(0);
    const sniff = () => {
      const chunk = socket.read() as Buffer | null;
      if (chunk === null) return;
      seen = Buffer.concat([seen, chunk]);
      const length = Math.min(seen.length, H2_PREFACE.length);
      const isH2 = seen.subarray(0, length).equals(H2_PREFACE.subarray(0, length));
      if (isH2 && seen.length < H2_PREFACE.length) return;
      socket.off("readable", sniff);
      socket.setTimeout(0);
      socket.unshift(seen);
      (isH2 ? h2 : h1).emit("connection", socket);
    };
    socket.on("readable", sniff);
    socket.on("error", () => socket.destroy());
    // A connection that never says which protocol it speaks does not keep its socket.
    socket.setTimeout(SNIFF_TIMEOUT_MS, () => socket.destroy());
  });
  // node's http server tracks its connections only from its 'listening' event, which h1 never gets
  // itself: without it a drain closed neither idle connections nor hung ones.
  server.on("listening", () => h1.emit("listening"));
  return {
    server,
    async close(graceMs) {
      closing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      h1.closeIdleConnections();
      // GOAWAY: no new streams on open sessions, in-flight ones finish.
      for (const session of sessions.keys()) session.close();
      const timer = setTimeout(() => {
        h1.closeAllConnections();
        for (const session of sessions.keys()) session.destroy();
      }, graceMs);
      timer.unref();
      // Connections that finish their last request while draining are closed as they go idle.
      const idle = setInterval(() => h1.closeIdleConnections(), 100);
      idle.unref();
      await closed;
      clearTimeout(timer);
      clearInterval(idle);
      clearInterval(guard);
    },
  };
}
