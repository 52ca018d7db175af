import { createReplayClient, type ErrorCode, isErrorCode, listReplays, ReplayApiError } from "@replay/client";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { provisionTenant } from "./http.js";
import { sharedSystems } from "./shared-system.js";

// The @replay/client package against a running system in both modes, imported as a user imports it
// (its built output, through the workspace's node_modules link): bearer routes, signed routes with a
// query and a body signed as sent, and problems as typed results.

/** The key with its last character changed (to another one: a key may end in "x" already). */
const wrongLast = (key: string) => `${key.slice(0, -1)}${key.endsWith("x") ? "y" : "x"}`;

describe.each(sharedSystems())("the client package against a running system ($mode mode)", (sys) => {
  async function clients() {
    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000, serverLimit: 10n });
    return { t, client: createReplayClient({ baseUrl: sys.baseUrl, apiKey: t.key, signingKey: t.signer }) };
  }

  it("creates a pending server, lists it and the servers with the bearer key", async () => {
    const { client } = await clients();
    const created = await client.POST("/v1/api/servers", { body: { name: "  client server " } });
    expect(created.response.status).toBe(201);
    expect(created.data?.name).toBe("client server");
    const pending = await client.GET("/v1/api/servers/pending");
    expect(pending.data?.pending.map((p) => p.serverId)).toContain(created.data?.serverId);
    const servers = await client.GET("/v1/api/servers");
    expect(servers.response.status).toBe(200);
    expect(servers.data?.servers).toEqual([]);
  });

  it("lists replays on the signed route, with a query, and on the bearer route", async () => {
    const { client } = await clients();
    const signed = await client.GET("/v1/replays", { params: { query: { page_size: 5 } } });
    expect(signed.error).toBeUndefined();
    expect(signed.data).toMatchObject({ results: [], next_page_token: "", page_size: 5 });
    const bearer = await client.GET("/v1/api/replays");
    expect(bearer.error).toBeUndefined();
    expect(bearer.data?.results).toEqual([]);
  });

  it("signs a body exactly as sent: a webhook subscription is created, listed and deleted", async () => {
    const { client } = await clients();
    const created = await client.POST("/v1/webhooks", {
      body: { url: "https://hooks.example.com/replay", events: ["asset.ready"] },
    });
    expect(created.error).toBeUndefined();
    const id = created.data?.id ?? "";
    const listed = await client.GET("/v1/webhooks");
    expect(listed.data?.subscriptions.map((s) => s.id)).toContain(id);
    const deleted = await client.DELETE("/v1/webhooks/{id}", { params: { path: { id } } });
    expect(deleted.response.status).toBe(204);
  });

  it("answers problems as typed results with the contract's code", async () => {
    const { t } = await clients();
    const wrongKey = createReplayClient({ baseUrl: sys.baseUrl, apiKey: wrongLast(t.key) });
    const refused = await wrongKey.GET("/v1/api/servers");
    expect(refused.response.status).toBe(401);
    const code: ErrorCode | undefined = isErrorCode(refused.error?.code) ? refused.error.code : undefined;
    expect(code).toBe("INVALID_API_KEY");

    const wrongSecret = createReplayClient({ baseUrl: sys.baseUrl, signingKey: { ...t.signer, secret: "not-it" } });
    const unsigned = await wrongSecret.GET("/v1/replays");
    expect(unsigned.response.status).toBe(401);
    expect(unsigned.error?.code).toBe("INVALID_SIGNATURE");

    const { client } = await clients();
    const missing = await client.GET("/v1/replays/{id}", { params: { path: { id: crypto.randomUUID() } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.code).toBe("REPLAY_NOT_FOUND");
  });
});

const withDatabase = sharedSystems().filter((sys) => sys.databaseUrl !== undefined);
describe.runIf(withDatabase.length > 0)("the client package's paging iterator", () => {
  const sys = withDatabase[0] as (typeof withDatabase)[number];
  const db = new pg.Pool({ connectionString: sys.databaseUrl, max: 1 });
  afterAll(() => db.end());

  it("walks every page of a tenant's replays once, newest first", async () => {
    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000 });
    // A century ahead, so that the retention worker leaves the rows alone while the test reads them.
    const { rows } = await db.query<{ id: string; started_at: Date }>(
      `INSERT INTO replays.replay (replay_id, tenant_id, server_id, integration, quality, status, pipeline,
         started_at, ended_at, duration_ms, size_bytes, format_version, storage_tier, retention_until, visibility,
         archive_key, hot_until)
       SELECT id, $1::uuid, gen_random_uuid(), 'rust', 'standard', 'ready', 'ended', at, at + interval '5 s', 5000, 1000, 1,
              'hot', '2127-01-01Z', 'staff', 'tenant/' || $1::text || '/replay/' || id || '.rpl', '2127-01-01Z'
         FROM (SELECT gen_random_uuid() AS id, '2126-03-01Z'::timestamptz + i * interval '1 min' AS at
                 FROM generate_series(1, 250) AS i) AS seeded
       RETURNING replay_id::text AS id, started_at`,
      [t.tenantId],
    );
    const newestFirst = [...rows].sort((a, b) => b.started_at.getTime() - a.started_at.getTime()).map((r) => r.id);

    const client = createReplayClient({ baseUrl: sys.baseUrl, signingKey: t.signer });
    const seen: string[] = [];
    for await (const replay of listReplays(client, { page_size: 40 })) seen.push(replay.id);
    expect(seen).toEqual(newestFirst);
  });

  it("throws the page's problem as a ReplayApiError", async () => {
    const t = await provisionTenant(sys);
    const client = createReplayClient({ baseUrl: sys.baseUrl, signingKey: { ...t.signer, secret: "not-it" } });
    const failed = await (async () => {
      for await (const _ of listReplays(client)) return undefined;
    })().catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(ReplayApiError);
    expect((failed as ReplayApiError).problem?.code).toBe("INVALID_SIGNATURE");
  });
});
