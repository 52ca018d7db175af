import type { DescService } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import type { ProcessName } from "../config.js";
import { DomainError } from "../errors.js";
import { peerCalls } from "../metrics.js";
import { createTransportPool } from "./clients.js";
import { codeName } from "./metrics.js";

/**
 * The deadline of a call to another service that a request waits on (a lookup of what that service
 * owns): one indexed read there. Past it the request answers 503 SERVICE_UNAVAILABLE with
 * Retry-After rather than holding its caller for the whole request deadline.
 */
export const PEER_TIMEOUT_MS = 2_000;

/** Clients of the other processes (a service, or the gateway's internal port), for lookups of what they own. */
export type Peers = {
  client<S extends DescService>(service: S, owner: ProcessName): Client<S>;
  close(): Promise<void>;
};

/**
 * Clients of the other services on the internal network (the internal token on every call), each
 * call sent where `serviceUrl` says at the time of the call: the embedded mode learns its
 * services' ports only once they all listen. A call without a deadline of its own gets
 * PEER_TIMEOUT_MS, and any failure comes back as ownerUnavailable's 503, so no caller repeats either.
 */
export function createPeers(serviceUrl: (owner: ProcessName) => string, token: string | undefined): Peers {
  const pool = createTransportPool({ token });
  return {
    client(service, owner) {
      const transport: Transport = {
        async unary(method, signal, timeoutMs, ...rest) {
          const started = performance.now();
          const labels = { owner, method: method.name, code: "ok" };
          try {
            return await pool.transport(serviceUrl(owner)).unary(method, signal, timeoutMs ?? PEER_TIMEOUT_MS, ...rest);
          } catch (err) {
            labels.code = codeName(ConnectError.from(err).code);
            throw ownerUnavailable(owner, err);
          } finally {
            peerCalls.observe(labels, (performance.now() - started) / 1000);
          }
        },
        stream: (...args) => pool.transport(serviceUrl(owner)).stream(...args),
      };
      return createClient(service, transport);
    },
    close: () => pool.close(),
  };
}

/**
 * A failed call to the service that owns what a request needs: whatever went wrong there (down,
 * too slow, refusing), the request cannot be answered now and may be retried, so it is a 503
 * SERVICE_UNAVAILABLE (with Retry-After at the gateway), never a 500 nor the owner's own error.
 */
export function ownerUnavailable(owner: ProcessName, err: unknown): DomainError {
  const why = err instanceof ConnectError ? err.code : "error";
  return new DomainError("SERVICE_UNAVAILABLE", `the ${owner} service did not answer; retry`, [], {
    cause: new Error(`${owner} lookup failed (${why}): ${String(err)}`),
  });
}
