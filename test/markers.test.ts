import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { expectProblem } from "./expect.js";
import { provisionTenant, type Res, send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";

// Timeline markers through the gateway (spec "Timeline markers", decisions.md §1 and §3), in both
// run modes: replays and servers are made through the real recording and servers APIs, so the
// markers service learns of them through its projections, as in production. Every refusal's status
// and code is held by gateway/routes/markers.test.ts.

const MARKER_FIELDS = ["actor", "category", "colour", "createdAt", "icon", "id", "label", "replayId", "tick"];
const ICONS = "swords skull shield pickaxe blast flask user-plus bookmark flag sparkles hammer star trophy bed diamond";

/** Runs `fn` on every item, at most `limit` at once; results in item order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T);
      }
    }),
  );
  return out;
}

describe.each(sharedSystems())("timeline markers ($mode mode)", (sys) => {
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));

  async function tenant() {
    const t = await provisionTenant(sys, { rateLimitRps: 5000, rateLimitBurst: 5000 });
    const create = (body: unknown, headers: Record<string, string> = {}) =>
      send(sys.baseUrl, "POST", "/v1/api/timeline-events", { headers: { ...t.bearer(), ...headers }, body });
    const list = (replayId: string) =>
      send(sys.baseUrl, "GET", `/v1/api/replays/${replayId}/timeline-events`, { headers: t.bearer() });
    const remove = (markerId: string) =>
      send(sys.baseUrl, "DELETE", `/v1/api/timeline-events/${markerId}`, { headers: t.bearer() });
    async function pendingServer(): Promise<string> {
      const res = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: `srv-${randomUUID().slice(0, 8)}` },
      });
      expect(res.status, res.text).toBe(201);
      return res.body.serverId;
    }
    /** A connected server's new recording: started right after the check-in that connects it. */
    async function startRecording(serverId?: string): Promise<{ serverId: string; replayId: string }> {
      const sid = serverId ?? (await pendingServer());
      if (!serverId) await grpcCheckIn(sys.internalUrl, sid, { pluginVersion: "1.0.0" });
      const { replayId } = await recording.startRecording({ serverId: sid, integration: "rust" });
      return { serverId: sid, replayId };
    }
    /** A marker that must be created; its body. */
    async function marker(replayId: string, fields: Record<string, unknown> = {}): Promise<any> {
      const res = await create({ replayId, tick: 1, label: "moment", ...fields });
      expect(res.status, res.text).toBe(201);
      return res.body;
    }
    return { ...t, create, list, remove, pendingServer, startRecording, marker };
  }

  it("creates a marker by replayId with every field, unset ones null, and lists it", async () => {
    const t = await tenant();
    const { replayId } = await t.startRecording();
    const m = await t.marker(replayId, { tick: 42, label: "  First blood\u3000" });
    expect(Object.keys(m).sort()).toEqual(MARKER_FIELDS);
    expect(m).toMatchObject({ replayId, tick: 42, label: "First blood", category: null, colour: null, icon: null });
    expect(m.actor).toBeNull();
    expect(m.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const full = await t.marker(replayId.toUpperCase(), {
      tick: 2 ** 53 - 1,
      label: "😀".repeat(120),
      category: ` ${"c".repeat(60)} `,
      colour: "#A1b2C3",
      icon: "user-plus",
      actor: "é".repeat(80),
      id: "ignored",
      createdAt: "ignored",
      serverId: null,
    });
    expect(full).toMatchObject({
      replayId,
      tick: 2 ** 53 - 1,
      label: "😀".repeat(120),
      category: "c".repeat(60),
      colour: "#a1b2c3",
      icon: "user-plus",
      actor: "é".repeat(80),
    });
    expect(full.id).not.toBe("ignored");
    const listed = await t.list(replayId);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body).toEqual({ timelineEvents: [m, full] });
    for (const icon of ICONS.split(" ")) expect((await t.marker(replayId, { icon })).icon).toBe(icon);
  });

  it("pins a marker by serverId to the recording started a moment ago, and to nothing once it finished", async () => {
    const t = await tenant();
    const { serverId, replayId } = await t.startRecording();
    // No retry: the replays service answers for the recording it just started.
    const m = await t.create({ serverId: serverId.toUpperCase(), tick: 100, label: "Raid start" });
    expect(m.status, m.text).toBe(201);
    expect(m.body.replayId).toBe(replayId);
    expect("serverId" in m.body).toBe(false);
    await recording.finishRecording({ replayId, sizeBytes: 10n });
    expectProblem(await t.create({ serverId, tick: 1, label: "between" }), 404, "NO_ACTIVE_RECORDING");
    const second = await t.startRecording(serverId);
    const m2 = await t.create({ serverId, tick: 5, label: "second" });
    expect(m2.status, m2.text).toBe(201);
    expect(m2.body.replayId).toBe(second.replayId);
    const first = (await t.list(replayId)).body.timelineEvents as { id: string; label: string }[];
    expect(first.map((x) => x.id)).toEqual([m.body.id]);
  });

  it("answers NO_ACTIVE_RECORDING for a deauthorised server and REPLAY_NOT_FOUND for a purged one, whose replays keep taking markers", async () => {
    const t = await tenant();
    // A server's deauthorisation and purge reach the replays service as events: a create by its id
    // a moment after them may still land on its recording.

    const { serverId, replayId } = await t.startRecording();
    const del = await send(sys.baseUrl, "DELETE", `/v1/api/servers/${serverId}`, { headers: t.bearer() });
    expect(del.status, del.text).toBe(204);
    await pollUntil(
      () => t.create({ serverId, tick: 1, label: "x" }),
      (res) => res.status !== 201,
      10_000,
    ).then((res) => expectProblem(res, 404, "NO_ACTIVE_RECORDING"));

    const other = await t.startRecording();
    const purge = await send(sys.baseUrl, "DELETE", `/v1/api/servers/permanent/${other.serverId}`, {
      headers: t.bearer(),
    });
    expect(purge.status, purge.text).toBe(204);
    await pollUntil(
      () => t.create({ serverId: other.serverId, tick: 1, label: "x" }),
      (res) => res.status !== 201,
      10_000,
    ).then((res) => expectProblem(res, 404, "REPLAY_NOT_FOUND"));
    // The purged server's replays and the deauthorised server's keep taking markers by replayId.
    await t.marker(other.replayId);
    await t.marker(replayId);
  });

  it("returns the first 201 again for a repeated Idempotency-Key and body, and refuses the key with another body", async () => {
    const t = await tenant();
    const { replayId } = await t.startRecording();
    const key = { "idempotency-key": `k-${randomUUID()}` };
    const first = await t.create({ replayId, tick: 1e3, label: "once", colour: "#ABCDEF" }, key);
    expect(first.status, first.text).toBe(201);
    const raw = `{ "colour":"#ABCDEF",  "label": "once", "tick": 1000.0, "replayId": "${replayId}" }`;
    const again = await send(sys.baseUrl, "POST", "/v1/api/timeline-events", {
      headers: { ...t.bearer(), ...key },
      rawBody: raw,
    });
    expect(again.status, again.text).toBe(201);
    expect(again.body).toEqual(first.body);
    expectProblem(await t.create({ replayId, tick: 2, label: "once" }, key), 422, "IDEMPOTENCY_KEY_REUSED");
    // Validation still answers first.
    expectProblem(await t.create({ replayId, tick: -1, label: "once" }, key), 400, "INVALID_TICK");
    // The marker deleted since: the same answer all the same, and no new marker.
    expect((await t.remove(first.body.id)).status).toBe(204);
    const after = await t.create({ replayId, tick: 1000, label: "once", colour: "#ABCDEF" }, key);
    expect(after.body).toEqual(first.body);
    expect((await t.list(replayId)).body.timelineEvents).toEqual([]);
    // Keys are per tenant.
    const other = await tenant();
    const theirs = await other.startRecording();
    const res = await other.create({ replayId: theirs.replayId, tick: 1, label: "x" }, key);
    expect(res.status, res.text).toBe(201);
    // A refused create is not remembered: the same key works once the target exists.
    const late = { "idempotency-key": `late-${randomUUID()}` };
    expectProblem(await t.create({ replayId: randomUUID(), tick: 1, label: "x" }, late), 404, "REPLAY_NOT_FOUND");
    expect((await t.create({ replayId, tick: 1, label: "x" }, late)).status).toBe(201);
    expect((await t.create({ replayId, tick: 1, label: "x" }, { "idempotency-key": "!~".repeat(127) })).status).toBe(
      201,
    );
  });

  it("creates one marker for concurrent requests with one key and one body, all answering it", async () => {
    const t = await tenant();
    const { replayId } = await t.startRecording();
    const key = { "idempotency-key": randomUUID() };
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => t.create({ replayId, tick: 3, label: "same" }, key)),
    );
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 201));
    expect(new Set(answers.map((r) => r.body.id)).size).toBe(1);
    expect((await t.list(replayId)).body.timelineEvents).toHaveLength(1);
  });

  it("keeps exactly 500 markers when 60 creates race on a replay holding 470, and frees a place on delete", async () => {
    const t = await tenant();
    const { replayId } = await t.startRecording();
    const seeded = await mapLimit(
      Array.from({ length: 470 }, (_, i) => i),
      8,
      (i) => t.create({ replayId, tick: i, label: `m${i}` }),
    );
    expect(seeded.filter((r) => r.status !== 201).map((r) => r.text)).toEqual([]);
    const raced = await Promise.all(
      Array.from({ length: 60 }, (_, i) => t.create({ replayId, tick: 1000 + i, label: `race ${i}` })),
    );
    const statuses = raced.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(30);
    for (const res of raced.filter((r) => r.status !== 201)) expectProblem(res, 409, "TOO_MANY_MARKERS");
    const listed = (await t.list(replayId)).body.timelineEvents;
    expect(listed).toHaveLength(500);
    expectProblem(await t.create({ replayId, tick: 1, label: "501st" }), 409, "TOO_MANY_MARKERS");
    expect((await t.remove(listed[0].id)).status).toBe(204);
    expectProblem(await t.remove(listed[0].id), 404, "MARKER_NOT_FOUND");
    await t.marker(replayId, { label: "in the freed place" });
    expectProblem(await t.create({ replayId, tick: 1, label: "501st" }), 409, "TOO_MANY_MARKERS");
  }, 120_000);

  it("lists by tick, then creation time", async () => {
    const t = await tenant();
    const { replayId } = await t.startRecording();
    const a = await t.marker(replayId, { tick: 30 });
    const b = await t.marker(replayId, { tick: 10 });
    const c = await t.marker(replayId, { tick: 20 });
    await pollUntil(
      async () => Date.now(),
      (now) => now > Date.parse(b.createdAt),
      10_000,
      1,
    );
    const d = await t.marker(replayId, { tick: 10 });
    const ids = (await t.list(replayId)).body.timelineEvents.map((m: { id: string }) => m.id);
    expect(ids).toEqual([b.id, d.id, c.id, a.id]);
  });

  it("removes a deleted replay's markers, and no marker created around the delete survives it", async () => {
    const t = await tenant();
    const { replayId } = await t.startRecording();
    await recording.finishRecording({ replayId, sizeBytes: 10n });
    for (let i = 0; i < 5; i++) await t.marker(replayId, { tick: i });
    // Creates keep coming while the replay is deleted.
    let stop = false;
    const created: Res[] = [];
    const creating = (async () => {
      while (!stop) created.push(await t.create({ replayId, tick: 9, label: "racing" }));
    })();
    const del = await sendSigned(sys.baseUrl, t.signer, "DELETE", `/v1/replays/${replayId}`);
    expect(del.status, del.text).toBe(204);
    // decisions.md §3: within 5 s of the delete's 204 the list answers 404.
    await pollUntil(
      () => t.list(replayId),
      (res) => res.status === 404,
      5_000,
    );
    stop = true;
    await creating;
    expectProblem(await t.list(replayId), 404, "REPLAY_NOT_FOUND");
    expectProblem(await t.create({ replayId, tick: 1, label: "late" }), 404, "REPLAY_NOT_FOUND");
    for (const res of created) expect([201, 404], res.text).toContain(res.status);
    if (!sys.databaseUrl) return;
    const db = new pg.Client({ connectionString: sys.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query("SELECT count(*)::int AS n FROM markers.marker WHERE replay_id = $1", [replayId]);
      expect(rows[0].n).toBe(0);
    } finally {
      await db.end();
    }
  }, 60_000);
});
