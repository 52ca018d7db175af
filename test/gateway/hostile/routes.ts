import type { Prng } from "./prng.js";
import { prngUuid } from "./values.js";

// Per-route schemas of the public API (gateway/routes): what a valid-ish request to each carries,
// for the generator to send as it is or mutated. hostile.test.ts checks the table is complete.

/** What a schema's value makers draw on: the PRNG and the ids that exist in the test tenant. */
export type Context = { prng: Prng; knownIds: readonly string[] };

/** Makes the JSON text of a valid-ish value for a body field. */
type JsonMaker = (ctx: Context) => string;
/** Makes a valid-ish raw query value. */
type QueryMaker = (ctx: Context) => string;

export type RouteSchema = {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  auth: "api-key" | "signature";
  body?: Record<string, JsonMaker>;
  query?: Record<string, QueryMaker>;
};

const json = (value: unknown) => JSON.stringify(value);
const id: JsonMaker = ({ prng, knownIds }) =>
  json(prng.chance(0.5) && knownIds.length > 0 ? prng.pick(knownIds) : prngUuid(prng));
const name: JsonMaker = ({ prng }) => json(`srv-${prng.int(1e6)}`);
const pageQuery: Record<string, QueryMaker> = {
  page_size: ({ prng }) => String(1 + prng.int(100)),
  page_token: ({ prng }) => prng.pick(["", "abc", "eyJ2IjoxfQ.x"]),
};
const replayQuery: Record<string, QueryMaker> = {
  ...pageQuery,
  server_id: ({ prng, knownIds }) => (knownIds.length > 0 && prng.chance(0.5) ? prng.pick(knownIds) : prngUuid(prng)),
  integration: ({ prng }) => prng.pick(["minecraft", "cs2", "Minecraft", "a b"]),
};
const markerBody: Record<string, JsonMaker> = {
  replayId: id,
  serverId: id,
  tick: ({ prng }) => String(prng.int(100_000)),
  label: ({ prng }) => json(`kill ${prng.int(100)}`),
  category: () => json("combat"),
  colour: ({ prng }) => json(prng.pick(["#ff0000", "#ABCDEF", "red"])),
  icon: ({ prng }) => json(prng.pick(["swords", "skull", "https://x/y.png"])),
  actor: () => json("bot"),
};
const subscriptionChange: Record<string, JsonMaker> = {
  disabled: ({ prng }) => json(prng.pick([true, false, "yes", null])),
  rateLimitPerSecond: ({ prng }) => json(prng.pick([1, 50, 10_000, 0, 10_001, null, 1.5, "5"])),
};
const rotation: Record<string, JsonMaker> = {
  graceSeconds: ({ prng }) => json(prng.pick([0, 60, 86_400, 604_800, -1, 604_801, "60", null])),
};
const recovery: Record<string, JsonMaker> = {
  since: ({ prng }) =>
    json(prng.pick([new Date(Date.now() - 3_600_000).toISOString(), "2020-01-01T00:00:00Z", "yesterday", null])),
  until: ({ prng }) => json(prng.pick([new Date().toISOString(), "2999-01-01T00:00:00Z", "not a time", null])),
};
const webhookBody: Record<string, JsonMaker> = {
  url: ({ prng }) => json(prng.pick(["https://example.com/hook", "http://127.0.0.1/", "https://2130706433/"])),
  events: ({ prng }) => json(prng.pick([["asset.ready"], ["collection.finalized", "asset.deleted"], ["nope"], []])),
};

export const routeSchemas: readonly RouteSchema[] = [
  { method: "POST", path: "/v1/api/timeline-events", auth: "api-key", body: markerBody },
  { method: "DELETE", path: "/v1/api/timeline-events/:id", auth: "api-key" },
  { method: "GET", path: "/v1/api/replays/:id/timeline-events", auth: "api-key" },
  { method: "GET", path: "/v1/api/servers", auth: "api-key" },
  { method: "GET", path: "/v1/api/servers/pending", auth: "api-key" },
  {
    method: "POST",
    path: "/v1/api/servers",
    auth: "api-key",
    body: { name, categoryId: id, sourceServerId: id },
  },
  { method: "PATCH", path: "/v1/api/servers/:id", auth: "api-key", body: { name } },
  { method: "DELETE", path: "/v1/api/servers/:id", auth: "api-key" },
  { method: "DELETE", path: "/v1/api/servers/permanent/:id", auth: "api-key" },
  { method: "DELETE", path: "/v1/api/servers/pending/:id", auth: "api-key" },
  { method: "GET", path: "/v1/replays", auth: "signature", query: replayQuery },
  { method: "GET", path: "/v1/replays/:id", auth: "signature" },
  { method: "DELETE", path: "/v1/replays/:id", auth: "signature" },
  { method: "GET", path: "/v1/api/replays", auth: "api-key", query: replayQuery },
  { method: "GET", path: "/v1/api/replays/:id", auth: "api-key" },
  { method: "POST", path: "/v1/webhooks", auth: "signature", body: webhookBody },
  { method: "GET", path: "/v1/webhooks", auth: "signature" },
  { method: "DELETE", path: "/v1/webhooks/:id", auth: "signature" },
  { method: "GET", path: "/v1/webhooks/:id/deliveries", auth: "signature", query: pageQuery },
  { method: "GET", path: "/v1/webhooks/deliveries/:id", auth: "signature" },
  { method: "POST", path: "/v1/webhooks/deliveries/:id/replay", auth: "api-key" },
  { method: "GET", path: "/v1/webhooks/:id", auth: "signature" },
  { method: "PATCH", path: "/v1/webhooks/:id", auth: "signature", body: { ...webhookBody, ...subscriptionChange } },
  { method: "POST", path: "/v1/webhooks/:id/rotate-secret", auth: "signature", body: rotation },
  { method: "POST", path: "/v1/webhooks/:id/recover", auth: "signature", body: recovery },
  { method: "GET", path: "/v1/webhooks/:id/stats", auth: "signature" },
];
