import type { ServerOptions } from "node:http2";

/**
 * What one HTTP/2 connection to an internal port may hold, each value's reason in docs/http2-limits.md.
 * Node's defaults advertise nothing and let one connection hold far more than any client of ours needs.
 */
export const H2_LIMITS = {
  /** RFC 9113's recommended floor; C-core and grpc-js queue behind it rather than fail. */
  maxConcurrentStreams: 100,
  /** C-core's own limit; under HPACK's 64 KiB per field, so an oversized block is a stream error only. */
  maxHeaderListSize: 16 * 1024,
  maxHeaderListPairs: 64,
  /** Megabytes. */
  maxSessionMemory: 4,
  maxSettings: 16,
  maxOutstandingPings: 4,
  maxSessionRejectedStreams: 100,
  maxSessionInvalidFrames: 100,
  /** "Rapid reset": counts every stream closed by the peer before its answer began, NO_ERROR too. */
  earlyResetBurst: 200,
  earlyResetsPerSecond: 20,
  /** Cut only while data is owed: a Health/Watch stream between messages and an idle connection owe nothing. */
  stallTimeoutMs: 15_000,
  stallMinProgressBytes: 16 * 1024,
  /** For a session suspected of no longer reading (h2-session-guard.ts) to answer a PING. */
  wedgeTimeoutMs: 3_000,
  checkIntervalMs: 500,
} as const;

export type H2Limits = { -readonly [K in keyof typeof H2_LIMITS]: number };

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
