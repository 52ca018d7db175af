import { notImplemented, type Route } from "./route.js";

/** Timeline markers: spec "Timeline markers", decisions.md §3. The markers service comes with its issue. */
export function markerRoutes(): Route[] {
  return [
    {
      method: "POST",
      path: "/v1/api/timeline-events",
      auth: "api-key",
      scope: "replays:write",
      handle: notImplemented,
    },
    {
      method: "DELETE",
      path: "/v1/api/timeline-events/:id",
      auth: "api-key",
      scope: "replays:write",
      handle: notImplemented,
    },
    {
      method: "GET",
      path: "/v1/api/replays/:id/timeline-events",
      auth: "api-key",
      scope: "replays:read",
      handle: notImplemented,
    },
  ];
}
