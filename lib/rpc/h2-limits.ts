import type { ServerOptions } from "node:http2";

/**
 * What one HTTP/2 connection to an internal port may hold, set on purpose (docs/http2-limits.md
 * has the measurements). Node's defaults advertise nothing (an empty SETTINGS frame), so a client
 * cannot know a limit before it hits one, and some of the defaults (no stream limit, 10 MB of
 * session memory) let one connection hold far more than any client of ours needs.
 */
export const H2_LIMITS = {
  /**
   * Streams open at once on one connection, advertised. A recorder's gRPC client multiplexes its
   * check-ins, recording calls and uploads on one connection, a handful at a time; replayctl and
   * buf curl make one call. 100 is the floor RFC 9113 §6.5.2 recommends, what C-core and grpc-js
   * queue behind (they wait for a free stream, they do not fail), and bounds what one connection
   * can make this process hold at once (100 calls, 100 response bodies).
   */
  maxConcurrentStreams: 100,
  /**
   * Header block a request may carry, advertised: a client that honours it fails its own call at
   * once, and one that does not gets RST_STREAM(ENHANCE_YOUR_CALM) on that stream, which C-core
   * and grpc-js report as RESOURCE_EXHAUSTED. Our calls carry well under 1 KiB (token, actor,
   * trace, tenant); 16 KiB is C-core's own hard limit on metadata it receives. It is below the
   * 64 KiB one header field may have before the HPACK decoder itself fails the connection, so a
   * block too large but made of ordinary fields is a stream error, not a connection error.
   */
  maxHeaderListSize: 16 * 1024,
  /** Header fields in a request (Node's default is 128); ours carry about 12. */
  maxHeaderListPairs: 64,
  /**
   * Megabytes nghttp2 may hold for one session (queued frames, header tables, unsent data
   * handed to it) before new streams are refused with ENHANCE_YOUR_CALM. Node's default is 10.
   */
  maxSessionMemory: 4,
  /** SETTINGS entries in one frame (Node's default 32); a SETTINGS flood is cut past it. */
  maxSettings: 16,
  /** PINGs we sent and the peer has not acknowledged; the session guard sends one at a time. */
  maxOutstandingPings: 4,
  /**
   * Streams refused (over the stream limit, or for session memory) before the connection is
   * destroyed: a client that keeps opening streams it was told it may not open is not a client.
   */
  maxSessionRejectedStreams: 100,
  /** Frames that fail validation before the connection is destroyed (Node's default 1000). */
  maxSessionInvalidFrames: 100,
  /**
   * Streams the peer may reset before we answered them: a burst, then so many a second. A sane
   * client cancels a call now and then (a deadline, a user pressing Ctrl-C); a reset storm is the
   * "rapid reset" attack, each reset a call the server starts for nothing. nghttp2's own limiter
   * (streamResetBurst/Rate, 1000 and 33/s) counts only some resets; this one counts every
   * stream the peer closed before its answer began, whatever the error code (NO_ERROR too).
   */
  earlyResetBurst: 200,
  earlyResetsPerSecond: 20,
  /**
   * A session whose peer has let us owe it data (a stream with unsent bytes) and has read less
   * than `stallMinProgressBytes` of it for this long is cut: a stalled reader holds every
   * response it asked for. A long-lived stream (Health/Watch) owes nothing between messages, and
   * an idle connection owes nothing at all: neither is cut.
   */
  stallTimeoutMs: 15_000,
  stallMinProgressBytes: 16 * 1024,
  /**
   * How long a session suspected of no longer reading (h2-session-guard.ts) has to answer a PING
   * before it is cut: a live peer on the internal network answers in milliseconds. A session
   * whose PING is not even written by the next look is cut then (half a second to a second).
   */
  wedgeTimeoutMs: 3_000,
  /** How often the sessions are looked at for a stall or a wedged decoder. */
  checkIntervalMs: 500,
} as const;

export type H2Limits = { -readonly [K in keyof typeof H2_LIMITS]: number };

/** The node:http2 server options the limits make. */
export function h2ServerOptions(limits: H2Limits): ServerOptions {
  return {
    settings: {
      maxConcurrentStreams: limits.maxConcurrentStreams,
      maxHeaderListSize: limits.maxHeaderListSize,
    },
    maxHeaderListPairs: limits.maxHeaderListPairs,
    maxSessionMemory: limits.maxSessionMemory,
    maxSettings: limits.maxSettings,
    maxOutstandingPings: limits.maxOutstandingPings,
    maxSessionRejectedStreams: limits.maxSessionRejectedStreams,
    maxSessionInvalidFrames: limits.maxSessionInvalidFrames,
  };
}
