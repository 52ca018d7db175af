import type { Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { internalTokenInterceptor } from "./internal-token.js";

/**
 * One HTTP/2 transport per backend address, shared by every client of that backend, so that
 * calls multiplex over one connection instead of opening one per client.
 */
export function createTransportPool(options: { token?: string } = {}): { transport(baseUrl: string): Transport } {
  const interceptors = options.token ? [internalTokenInterceptor(options.token)] : [];
  const transports = new Map<string, Transport>();
  return {
    transport(baseUrl) {
      let transport = transports.get(baseUrl);
      if (!transport) {
        transport = createConnectTransport({
          baseUrl,
          httpVersion: "2",
          useBinaryFormat: true,
          interceptors,
          // In-cluster calls: no gzip (see createRpcServer).
          acceptCompression: [],
          // Keeps idle connections warm and notices a dead peer instead of hanging on it.
          pingIntervalMs: 30_000,
          idleConnectionTimeoutMs: 60_000,
        });
        transports.set(baseUrl, transport);
      }
      return transport;
    },
  };
}
