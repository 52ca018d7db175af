import type { DescService } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import type { ProcessName } from "../config.js";
import { DomainError } from "../errors.js";
import { peerCalls } from "../metrics.js";
import { createTransportPool } from "./clients.js";
import { codeName } from "./metrics.js";

/** One indexed read at the owner; past it, 503 rather than holding the caller for its whole deadline. */
export const PEER_TIMEOUT_MS = 2_000;

export type Peers = {
  client<S extends DescService>(service: S, owner: ProcessName): Client<S>;
  close(): Promise<void>;
};

/**
 * `serviceUrl` is asked at each call: the embedded mode learns its ports only once all listen. Calls get
 * PEER_TIMEOUT_MS unless they set a deadline, and any failure is ownerUnavailable's 503.
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

/** Whatever went wrong at the owner, the request may be retried: 503, never a 500 nor the owner's own error. */
export function ownerUnavailable(owner: ProcessName, err: unknown): DomainError {
  const why = err instanceof ConnectError ? err.code : "error";
  return new DomainError("SERVICE_UNAVAILABLE", `the ${owner} service did not answer; retry`, [], {
    cause: new Error(`${owner} lookup failed (${why}): ${String(err)}`),
  });
}
