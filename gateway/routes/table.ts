import type { Client } from "@connectrpc/connect";
import type { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import type { ReplaysService } from "../../gen/replay/replays/v1/replays_pb.js";
import type { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import type { WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { markerRoutes } from "./markers.js";
import { replayRoutes } from "./replays.js";
import type { Route } from "./route.js";
import { serverRoutes } from "./servers.js";
import { webhookSubscriptionRoutes } from "./webhook-subscriptions.js";
import { webhookRoutes } from "./webhooks.js";

export type BackendClients = {
  markers: Client<typeof MarkersService>;
  servers: Client<typeof ServersService>;
  replays: Client<typeof ReplaysService>;
  webhooks: Client<typeof WebhooksService>;
};

/**
 * Every public route of replay-api.md and decisions.md, with its authentication scheme and scope.
 * The table is the whole public surface: authentication, scope, 404 and 405 follow from it.
 */
export function publicRoutes(clients: BackendClients): Route[] {
  return [
    ...markerRoutes(clients.markers),
    ...serverRoutes(clients.servers),
    ...replayRoutes(clients.replays),
    ...webhookRoutes(clients.webhooks),
    ...webhookSubscriptionRoutes(clients.webhooks),
  ];
}
