import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  clockSkewSeconds,
  createReplayClient,
  type ErrorCode,
  isErrorCode,
  ReplayApiError,
  type ReplayClient,
} from "@replay/client";
import { describe, expect, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { provisionTenant } from "./http.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";

// The @replay/client package against a running system in both modes, imported as a user imports it
// (its built output, through the workspace's node_modules link): every route once, the signing
// edge cases the gateway accepts, problems as typed results, the clock skew on REQUEST_EXPIRED and
// a retry after a real 429. Paging over hundreds of replays is test/client-paging.test.ts; a retry
// after a real 503 is in test/faults/backend-down.test.ts; real deliveries test/client-webhooks.test.ts.

/** The key with its last character changed (to another one: a key may end in "x" already). */
const wrongLast = (key: string) => `${key.slice(0, -1)}${key.endsWith("x") ? "y" : "x"}`;

/** Every operation of the API document, as "METHOD /template". */
async function documentedRoutes(baseUrl: string): Promise<string[]> {
  const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, unknown>>;
  };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops)
      .filter((m) => ["get", "post", "put", "patch", "delete"].includes(m))
      .map((m) => `${m.toUpperCase()} ${path}`),
  );
}

/** Records the route template of every request the client sends (openapi-fetch's schemaPath). */
function routesSent(client: ReplayClient): Set<string> {
  const sent = new Set<string>();
  client.use({
    onRequest({ request, schemaPath }) {
      sent.add(`${request.method} ${schemaPath}`);
    },
  });
  return sent;
}

describe.each(sharedSystems())("the client package against a running system ($mode mode)", (sys) => {
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));

  async function clients(plan: Parameters<typeof provisionTenant>[1] = {}) {
    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000, serverLimit: 10n, ...plan });
    return { t, client: createReplayClient({ baseUrl: sys.baseUrl, apiKey: t.key, signingKey: t.signer }) };
  }

  it("calls every route of the API once, each answered as documented", async () => {
    const { client } = await clients();
    const sent = routesSent(client);
    const ok = <T extends { error?: unknown; response: Response }>(answer: T, status: number) => {
      expect(answer.response.status, JSON.stringify(answer.error)).toBe(status);
      return answer;
    };

    // Servers: a pending setup cancelled, another connected, renamed, recorded on, deauthorised, purged.
    const cancelled = ok(await client.POST("/v1/api/servers", { body: { name: "to cancel" } }), 201).data;
    const pending = ok(await client.GET("/v1/api/servers/pending"), 200).data;
    expect(pending?.pending.map((p) => p.serverId)).toEqual([cancelled?.serverId]);
    const cancelId = cancelled?.serverId ?? "";
    ok(await client.DELETE("/v1/api/servers/pending/{id}", { params: { path: { id: cancelId } } }), 204);
    const created = ok(await client.POST("/v1/api/servers", { body: { name: "  eu-1 " } }), 201).data;
    const serverId = created?.serverId ?? "";
    expect(created?.name).toBe("eu-1");
    await grpcCheckIn(sys.internalUrl, serverId);
    const renamed = ok(
      await client.PATCH("/v1/api/servers/{id}", { params: { path: { id: serverId } }, body: { name: "eu-2" } }),
      200,
    ).data;
    expect(renamed?.name).toBe("eu-2");
    const { replayId } = await pollUntil(
      () => recording.startRecording({ serverId }).catch(() => undefined),
      (started) => started !== undefined,
      15_000,
    ).then((started) => started as { replayId: string });

    // A marker by server id during the recording, then read and deleted by the replay's id.
    const marker = ok(
      await client.POST("/v1/api/timeline-events", { body: { serverId, tick: 120, label: "boss down ✓" } }),
      201,
    ).data;
    expect(marker).toMatchObject({ replayId, tick: 120, label: "boss down ✓" });
    await recording.finishRecording({ replayId, sizeBytes: 1024n });
    const markers = ok(
      await client.GET("/v1/api/replays/{id}/timeline-events", { params: { path: { id: replayId } } }),
      200,
    ).data;
    expect(markers?.timelineEvents.map((m) => m.id)).toEqual([marker?.id]);
    ok(await client.DELETE("/v1/api/timeline-events/{id}", { params: { path: { id: marker?.id ?? "" } } }), 204);

    // Replays by both schemes.
    const byKey = ok(await client.GET("/v1/api/replays", { params: { query: { server_id: serverId } } }), 200).data;
    expect(byKey?.results.map((r) => r.id)).toEqual([replayId]);
    ok(await client.GET("/v1/api/replays/{id}", { params: { path: { id: replayId } } }), 200);
    const signed = ok(await client.GET("/v1/replays", { params: { query: { page_size: 5 } } }), 200).data;
    expect(signed?.results.map((r) => r.id)).toEqual([replayId]);
    const replay = ok(await client.GET("/v1/replays/{id}", { params: { path: { id: replayId } } }), 200).data;
    expect(replay).toMatchObject({ id: replayId, server_id: serverId, size_bytes: 1024 });

    // Webhooks: a subscription whose host never resolves (.invalid), so its delivery fails and can be
    // replayed; the event is the replay's deletion below.
    const subscription = ok(
      await client.POST("/v1/webhooks", {
        body: { url: "https://hooks.replay.invalid/in", events: ["asset.deleted"] },
      }),
      201,
    ).data;
    const subscriptionId = subscription?.id ?? "";
    expect(subscription?.secret).toMatch(/^whsec_/);
    const listed = ok(await client.GET("/v1/webhooks"), 200).data;
    expect(listed?.subscriptions.map((s) => s.id)).toEqual([subscriptionId]);
    ok(await client.DELETE("/v1/replays/{id}", { params: { path: { id: replayId } } }), 204);
    const deliveryId = await pollUntil(
      async () => {
        const log = await client.GET("/v1/webhooks/{id}/deliveries", { params: { path: { id: subscriptionId } } });
        return log.data?.results.find((d) => d.status === "failed")?.id;
      },
      (id) => id !== undefined,
      60_000,
    );
    const delivery = ok(
      await client.GET("/v1/webhooks/deliveries/{id}", { params: { path: { id: deliveryId ?? "" } } }),
      200,
    ).data;
    expect(delivery).toMatchObject({ event: "asset.deleted", subscription_id: subscriptionId, status: "failed" });
    const replayed = ok(
      await client.POST("/v1/webhooks/deliveries/{id}/replay", { params: { path: { id: deliveryId ?? "" } } }),
      202,
    ).data;
    expect(replayed?.retry_count).toBe(1);
    const path = { params: { path: { id: subscriptionId } } };
    expect(ok(await client.GET("/v1/webhooks/{id}", path), 200).data?.disabled).toBe(false);
    const patched = ok(await client.PATCH("/v1/webhooks/{id}", { ...path, body: { disabled: true } }), 200).data;
    expect(patched?.disabledReason).toBe("manual");
    const rotated = ok(
      await client.POST("/v1/webhooks/{id}/rotate-secret", { ...path, body: { graceSeconds: 0 } }),
      200,
    );
    expect(rotated.data?.secret).toMatch(/^whsec_/);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    ok(await client.POST("/v1/webhooks/{id}/recover", { ...path, body: { since } }), 202);
    expect(ok(await client.GET("/v1/webhooks/{id}/stats", path), 200).data?.last24h.failed).toBeGreaterThan(0);
    ok(await client.DELETE("/v1/webhooks/{id}", { params: { path: { id: subscriptionId } } }), 204);

    // The server's end: deauthorised, then purged; the servers list is read before.
    const servers = ok(await client.GET("/v1/api/servers"), 200).data;
    expect(servers?.servers.map((s) => s.id)).toEqual([serverId]);
    ok(await client.DELETE("/v1/api/servers/{id}", { params: { path: { id: serverId } } }), 204);
    ok(await client.DELETE("/v1/api/servers/permanent/{id}", { params: { path: { id: serverId } } }), 204);

    expect([...sent].sort()).toEqual((await documentedRoutes(sys.baseUrl)).sort());
  });

  it("signs the query exactly as sent: repeated names, a plus, empty values, non-ASCII, a bare name", async () => {
    const { client } = await clients();
    const queries = [
      "integration=a+b&integration=&page_size=5&integration=a%2Bb",
      "z=1&%C3%A9t%C3%A9=%E2%9C%93&Z=2&flag&&b=&integration=%F0%9F%8E%AE%20x",
    ];
    for (const query of queries) {
      const answer = await client.GET("/v1/replays", { querySerializer: () => query });
      expect(answer.response.status, `${query}: ${JSON.stringify(answer.error)}`).toBe(200);
      expect(new URL(answer.response.url).search).toBe(`?${query}`);
    }
    // Through the typed query: the serializer's own encoding of the same characters.
    const typed = await client.GET("/v1/replays", { params: { query: { integration: "ünï+code ✓", page_size: 3 } } });
    expect(typed.response.status, JSON.stringify(typed.error)).toBe(200);
    expect(typed.data?.page_size).toBe(3);
  });

  it("answers problems as typed results with the contract's code", async () => {
    const { t, client } = await clients();
    const wrongKey = createReplayClient({ baseUrl: sys.baseUrl, apiKey: wrongLast(t.key) });
    const refused = await wrongKey.GET("/v1/api/servers");
    expect(refused.response.status).toBe(401);
    const code: ErrorCode | undefined = isErrorCode(refused.error?.code) ? refused.error.code : undefined;
    expect(code).toBe("INVALID_API_KEY");

    const wrongSecret = createReplayClient({ baseUrl: sys.baseUrl, signingKey: { ...t.signer, secret: "not-it" } });
    const unsigned = await wrongSecret.GET("/v1/replays");
    expect(unsigned.response.status).toBe(401);
    expect(unsigned.error?.code).toBe("INVALID_SIGNATURE");

    const missing = await client.GET("/v1/replays/{id}", { params: { path: { id: randomUUID() } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.code).toBe("REPLAY_NOT_FOUND");
    const invalid = await client.POST("/v1/api/timeline-events", {
      body: { replayId: randomUUID(), tick: -1, label: "x" },
    });
    expect(invalid.error?.code).toBe("INVALID_TICK");
  });

  it("says how far off this machine's clock is when the server answers REQUEST_EXPIRED", async () => {
    const { t } = await clients();
    const at = (offsetMs: number) =>
      createReplayClient({ baseUrl: sys.baseUrl, signingKey: t.signer, now: () => Date.now() + offsetMs });
    const ahead = await at(600_000).GET("/v1/replays");
    expect(ahead.response.status).toBe(401);
    expect(ahead.error?.code).toBe("REQUEST_EXPIRED");
    // The skew is the offset plus the answer's time in flight (the Date header has whole seconds):
    // a busy machine only adds to it.
    const aheadSkew = clockSkewSeconds(ahead.error) ?? 0;
    expect(aheadSkew).toBeGreaterThanOrEqual(599);
    expect(aheadSkew).toBeLessThan(660);
    expect(ahead.error?.detail).toContain(`this machine's clock is ${aheadSkew} s ahead of the server's`);
    const behind = await at(-400_000).GET("/v1/replays");
    const behindSkew = clockSkewSeconds(behind.error) ?? 0;
    expect(behindSkew).toBeGreaterThanOrEqual(-401);
    expect(behindSkew).toBeLessThan(-340);
    expect(behind.error?.detail).toContain(`this machine's clock is ${-behindSkew} s behind the server's`);
    // Within the window, the same key works.
    expect((await at(0).GET("/v1/replays")).response.status).toBe(200);
  });

  it("waits out a real 429 and retries a GET, never a POST", async () => {
    // One token a second (half a second per replica with two gateways), a bucket of one.
    const { t } = await clients({ rateLimitRps: 1, rateLimitBurst: 1 });
    const statuses: number[] = [];
    const observed = (input: Request, init?: RequestInit) =>
      fetch(input, init).then((res) => {
        statuses.push(res.status);
        return res;
      });
    const once = createReplayClient({ baseUrl: sys.baseUrl, apiKey: t.key, retry: false });
    const retrying = createReplayClient({ baseUrl: sys.baseUrl, apiKey: t.key, fetch: observed });
    /** Spends the bucket: requests until one is refused. */
    const exhaust = () =>
      pollUntil(
        async () => (await once.GET("/v1/api/servers")).response.status,
        (status) => status === 429,
        30_000,
      );

    // A refill may land between the exhausting request and the retrying one on a slow machine: try
    // until the retrying client met a 429 first.
    await pollUntil(
      async () => {
        await exhaust();
        statuses.length = 0;
        const answer = await retrying.GET("/v1/api/servers");
        expect(answer.response.status, JSON.stringify(answer.error)).toBe(200);
        return [...statuses];
      },
      (seen) => seen[0] === 429,
      60_000,
    );
    expect(statuses.at(-1)).toBe(200);

    await exhaust();
    statuses.length = 0;
    const post = await retrying.POST("/v1/api/servers", { body: { name: "not twice" } });
    expect(statuses).toHaveLength(1);
    if (post.response.status === 429) expect(post.error?.code).toBe("RATE_LIMITED");
  });

  it("throws a failed page of an iterator as a ReplayApiError with its problem", async () => {
    const { t } = await clients();
    const client = createReplayClient({ baseUrl: sys.baseUrl, signingKey: { ...t.signer, secret: "not-it" } });
    const failed = await (async () => {
      for await (const _ of client.replays.list()) return undefined;
    })().catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(ReplayApiError);
    expect((failed as ReplayApiError).problem?.code).toBe("INVALID_SIGNATURE");
  });
});
