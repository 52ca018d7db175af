import { notImplemented, type Route } from "./route.js";

/** Webhooks: spec "Webhooks", decisions.md §6. The webhooks service comes with its issue. */
export function webhookRoutes(): Route[] {
  return [
    { method: "POST", path: "/v1/webhooks", auth: "signature", handle: notImplemented },
    { method: "GET", path: "/v1/webhooks", auth: "signature", handle: notImplemented },
    { method: "DELETE", path: "/v1/webhooks/:id", auth: "signature", handle: notImplemented },
    { method: "GET", path: "/v1/webhooks/:id/deliveries", auth: "signature", handle: notImplemented },
    { method: "GET", path: "/v1/webhooks/deliveries/:id", auth: "signature", handle: notImplemented },
    {
      method: "POST",
      path: "/v1/webhooks/deliveries/:id/replay",
      auth: "api-key",
      scope: "collections:write",
      handle: notImplemented,
    },
  ];
}
