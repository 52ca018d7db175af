import type { Transport } from "@connectrpc/connect";
import { internalTokenHeaders } from "./internal-token.js";
import { createLeanTransport, type LeanTransport } from "./lean-transport.js";

/**
 * One transport per backend address, shared by every client of that backend: the lean Connect
 * transport, whose keep-alive connections to the backend are reused from call to call.
 */
export function createTransportPool(options: { token?: string } = {}): {
  transport(baseUrl: string): Transport;
  close(): Promise<void>;
} {
  const headers = internalTokenHeaders(options.token);
  const transports = new Map<string, LeanTransport>();
  return {
    transport(baseUrl) {
      let transport = transports.get(baseUrl);
      if (!transport) {
        transport = createLeanTransport({ baseUrl, headers });
        transports.set(baseUrl, transport);
      }
      return transport;
    },
    async close() {
      await Promise.all([...transports.values()].map((t) => t.close()));
      transports.clear();
    },
  };
}
