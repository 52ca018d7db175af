// The public port's limits on what a client may send and how long it may take: the body size every
// request is held to and the connection timeouts (docs/public-port.md).

/** decisions.md §1: "64 KiB" is 65 536 bytes, refused before authentication. */
export const BODY_LIMIT_BYTES = 65_536;

/**
 * How long the public port waits on a client (docs/public-port.md). Every limit is one a client
 * that means well never meets; each closes a way to hold the process's memory or sockets for free.
 */
export type ConnectionLimits = {
  /** The request line and headers must have arrived within this of their first byte (Node's headersTimeout). */
  headersTimeoutMs: number;
  /**
   * The whole request, headers and a body of at most 64 KiB, must have arrived within this (Node's
   * requestTimeout, 0 in Fastify by default: a body trickled at a byte a second held a socket and
   * its buffers for as long as the client liked). 64 KiB in 30 s is 2 KiB/s, slower than any link.
   */
  requestTimeoutMs: number;
  /**
   * A connection on which nothing moves either way for this long while a request is open is cut
   * (the socket's inactivity timeout): above all a client that never reads its answers, whose
   * queued bytes would otherwise stay in memory forever. Longer than the 10 s RPC deadline, so a
   * request waiting on its backend is never cut; idle keep-alive connections have their own timeout.
   */
  stallTimeoutMs: number;
  /** How often Node checks the two request timeouts (default 30 s, which would let them run 30 s late). */
  checkIntervalMs: number;
  /**
   * Requests one connection may have in flight (pipelined, answers not yet written); the next is
   * answered 429 and the connection closed. Browsers do not pipeline at all.
   */
  maxInFlightPerConnection: number;
};

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 30_000,
  stallTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
  maxInFlightPerConnection: 16,
};
