import http2, { type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import { logger } from "../log.js";
import type { H2Limits } from "./h2-limits.js";

const log = logger("lib:rpc:h2");

const { NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_NO_ERROR } = http2.constants;

/**
 * Reset before its answer began (any code, NO_ERROR too), or during it with an error code. Node ends a reset
 * stream's writable side itself, so `writableFinished` cannot tell.
 */
function isEarlyReset(stream: ServerHttp2Stream): boolean {
  return stream.aborted || !stream.headersSent || (stream.rstCode ?? NGHTTP2_NO_ERROR) !== NGHTTP2_NO_ERROR;
}

export type SessionGuard = {
  onStream(stream: ServerHttp2Stream): void;
  /** Every `checkIntervalMs`. */
  check(now: number): void;
};

/**
 * What node:http2 does not watch (docs/http2-limits.md): early resets, stalled readers, and a decoder wedged
 * by an oversized header field, after which Node never closes the connection and the caller waits forever.
 */
export function guardSession(session: ServerHttp2Session, limits: H2Limits, now = Date.now()): SessionGuard {
  const streams = new Set<ServerHttp2Stream>();
  let highestStreamId = 0;
  let resetTokens = limits.earlyResetBurst;
  let refilledAt = now;
  let owedSince: number | undefined;
  let writtenMark = 0;
  let owedMark = 0;
  let lastRead = -1;
  let ping: { sentAt: number; written: number } | undefined;

  const cut = (reason: string, fields: Record<string, unknown>) => {
    if (session.destroyed) return;
    log.warn({ ...fields, remote: session.socket?.remoteAddress }, reason);
    // null, not undefined: undefined takes destroy's default (NO_ERROR), which overrides the code.
    session.destroy(null as unknown as undefined, NGHTTP2_ENHANCE_YOUR_CALM);
  };

  const spendEarlyReset = () => {
    const at = Date.now();
    resetTokens = Math.min(
      limits.earlyResetBurst,
      resetTokens + ((at - refilledAt) / 1000) * limits.earlyResetsPerSecond,
    );
    refilledAt = at;
    resetTokens -= 1;
    if (resetTokens < 0) {
      cut("HTTP/2 session cut: streams reset before their answer faster than a client does", {
        burst: limits.earlyResetBurst,
        perSecond: limits.earlyResetsPerSecond,
      });
    }
  };

  const checkStall = (at: number) => {
    let owed = 0;
    for (const stream of streams) owed += stream.writableLength;
    const written = session.socket?.bytesWritten ?? 0;
    // Progress: the minimum read, or all that was owed when the period began (a long-lived
    // stream's small message, written just before a look, is drained by the next).
    const progressed = written - writtenMark >= Math.min(limits.stallMinProgressBytes, owedMark);
    if (owed === 0 || owedSince === undefined || progressed) {
      owedSince = owed > 0 ? at : undefined;
      writtenMark = written;
      owedMark = owed;
      return;
    }
    if (at - owedSince >= limits.stallTimeoutMs) {
      cut("HTTP/2 session cut: the peer stopped reading what it asked for", {
        stalledMs: at - owedSince,
        owedBytes: owed,
        openStreams: streams.size,
      });
    }
  };

  const checkWedged = (at: number) => {
    const read = session.socket?.bytesRead ?? 0;
    const written = session.socket?.bytesWritten ?? 0;
    const quiet = read === lastRead;
    lastRead = read;
    if (ping !== undefined) {
      // A live session writes a PING at once; a terminated nghttp2 session writes nothing more,
      // so a PING still unwritten a look later proves it, without waiting for the timeout.
      const unsent = written === ping.written && at > ping.sentAt;
      if (unsent || at - ping.sentAt >= limits.wedgeTimeoutMs) {
        cut("HTTP/2 session cut: it stopped reading (a header block its decoder refused)", {
          pingUnsent: unsent,
        });
      }
      return;
    }
    if (!quiet || (session.state.lastProcStreamID ?? 0) <= highestStreamId) return;
    ping = { sentAt: at, written };
    const sent = session.ping((err) => {
      // Answered: the session still reads; the stream it began and we never got was refused alone.
      if (err) return;
      ping = undefined;
      highestStreamId = Math.max(highestStreamId, session.state.lastProcStreamID ?? 0);
    });
    if (!sent) ping = undefined;
  };

  return {
    onStream(stream) {
      streams.add(stream);
      highestStreamId = Math.max(highestStreamId, stream.id ?? 0);
      stream.once("close", () => {
        streams.delete(stream);
        if (isEarlyReset(stream) && !session.destroyed) spendEarlyReset();
      });
    },
    check(at) {
      if (session.destroyed) return;
      checkStall(at);
      checkWedged(at);
    },
  };
}
