import type { BackendClients } from "../routes/table.js";
import { publicRoutes } from "../routes/table.js";
import { openApiDocument } from "./document.js";

/**
 * The route table with no backends behind it, for the document alone: describing a route never
 * calls its service, and a handler that did would throw here.
 */
function documentedRoutes() {
  const unreachable = new Proxy(
    {},
    {
      get: (_target, method) => () => {
        throw new Error(`the document's route table has no backend (called ${String(method)})`);
      },
    },
  );
  const clients = { markers: unreachable, servers: unreachable, replays: unreachable, webhooks: unreachable };
  return publicRoutes(clients as unknown as BackendClients);
}

/** The API reference as committed in `openapi.json` (and served at GET /openapi.json): stable bytes. */
export function publishedDocumentText(): string {
  return `${JSON.stringify(openApiDocument(documentedRoutes()), null, 2)}\n`;
}
