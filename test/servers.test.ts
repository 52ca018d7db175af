import { randomUUID } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { RecordingStartedSchema, ReplayDeletedSchema } from "../gen/replay/events/v1/replays_pb.js";
import { ServerStatus } from "../gen/replay/servers/v1/servers_pb.js";
import { decodeEvent, type EventSubject } from "../lib/bus/events.js";
import { createNatsBus } from "../lib/bus/nats.js";
import { ALL_SCOPES, provisionTenant, type Res, send } from "./http.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import { runReplayctl } from "./replayctl.js";
import { sharedSystems, testNatsUrl } from "./shared-system.js";
import type { SystemHandle } from "./system.js";

// Servers management through the gateway (spec "Servers", decisions.md §2 management keys and §4),
// recorder check-in over the internal API, in both run modes. Every refusal's status and code, in
// decisions.md §4's order, and another tenant's ids: gateway/routes/servers.test.ts.

const MINUTE = 60_000;

function expectProblem(res: Res, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.code }, res.text).toEqual({ status, code });
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
}

describe.each(sharedSystems())("servers ($mode mode)", (sys) => {
  async function tenant(plan: { serverLimit?: bigint } = {}) {
    const t = await provisionTenant(sys, plan);
    const api = (key = t.key) => ({
      get: (path: string) => send(sys.baseUrl, "GET", path, { headers: t.bearer(key) }),
      post: (path: string, body: unknown) => send(sys.baseUrl, "POST", path, { headers: t.bearer(key), body }),
      patch: (path: string, body: unknown) => send(sys.baseUrl, "PATCH", path, { headers: t.bearer(key), body }),
      delete: (path: string) => send(sys.baseUrl, "DELETE", path, { headers: t.bearer(key) }),
    });
    const owner = api();
    return {
      ...t,
      api,
      owner,
      async create(
        name = `srv-${randomUUID().slice(0, 8)}`,
        extra: Record<string, unknown> = {},
        client = owner,
      ): Promise<string> {
        const res = await client.post("/v1/api/servers", { name, ...extra });
        expect(res.status, res.text).toBe(201);
        return res.body.serverId;
      },
      async connected(name?: string, extra: Record<string, unknown> = {}): Promise<string> {
        const serverId = await this.create(name, extra);
        await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
        return serverId;
      },
      async member(role: MemberRole, opts: { instanceSettings?: boolean } = {}) {
        const { memberId } = await sys.admin.addMember({
          tenantId: t.tenantId,
          role,
          instanceSettings: opts.instanceSettings,
        });
        const { key } = await t.mintKey(ALL_SCOPES, memberId);
        return { memberId, api: api(key) };
      },
      async entry(serverId: string) {
        return (await owner.get("/v1/api/servers")).body.servers.find((s: { id: string }) => s.id === serverId);
      },
    };
  }

  it("creates a pending setup that the first check-in connects; the list shows every field", async () => {
    const t = await tenant();
    const created = await t.owner.post("/v1/api/servers", { name: "  Éclair 😀  " });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ serverId: expect.stringMatching(/^[0-9a-f-]{36}$/), name: "Éclair 😀" });
    const pending = await t.owner.get("/v1/api/servers/pending");
    expect(pending.body).toEqual({
      pending: [
        {
          serverId: created.body.serverId,
          name: "Éclair 😀",
          categoryId: null,
          createdAt: expect.stringMatching(/Z$/),
          sourceServerId: null,
        },
      ],
    });
    expect((await t.owner.get("/v1/api/servers")).body).toEqual({ servers: [] });

    const at = new Date(Date.now() - MINUTE);
    const checkIn = await grpcCheckIn(sys.internalUrl, created.body.serverId, { pluginVersion: "2.4.1", at });
    expect(checkIn.status).toBe(ServerStatus.ONLINE);
    expect((await t.owner.get("/v1/api/servers")).body.servers).toEqual([
      {
        id: created.body.serverId,
        name: "Éclair 😀",
        status: "online",
        lastSeenAt: at.toISOString(),
        pluginVersion: "2.4.1",
        replayCount: 0,
        categoryId: null,
        state: "connected",
      },
    ]);
    expect((await t.owner.get("/v1/api/servers/pending")).body).toEqual({ pending: [] });
  });

  it("derives status from the last check-in at read time; a check-in without a version keeps the stored one", async () => {
    const t = await tenant();
    const serverId = await t.create();
    await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "3.0.0", at: new Date(Date.now() - 16 * MINUTE) });
    expect(await t.entry(serverId)).toMatchObject({ status: "offline", pluginVersion: "3.0.0", state: "connected" });
    const future = new Date(Date.now() + 60 * MINUTE);
    const res = await grpcCheckIn(sys.internalUrl, serverId, { at: future });
    expect(res.status).toBe(ServerStatus.ONLINE);
    const entry = await t.entry(serverId);
    expect(Date.parse(entry.lastSeenAt)).toBeLessThanOrEqual(Date.now());
    expect(entry).toMatchObject({ status: "online", pluginVersion: "3.0.0" });
  });

  it("with one free slot, 20 concurrent creates give exactly one 201 and nineteen 409 SERVER_LIMIT_REACHED", async () => {
    const t = await tenant({ serverLimit: 3n });
    await t.connected();
    await t.create();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => t.owner.post("/v1/api/servers", { name: `race-${i}` })),
    );
    expect(answers.filter((r) => r.status === 201)).toHaveLength(1);
    for (const res of answers.filter((r) => r.status !== 201)) expectProblem(res, 409, "SERVER_LIMIT_REACHED");
    expect((await t.owner.get("/v1/api/servers/pending")).body.pending).toHaveLength(2);
  });

  it("cancelling, deauthorising and purging free their slot at once", async () => {
    const t = await tenant({ serverLimit: 1n });
    const pending = await t.create();
    expectProblem(await t.owner.post("/v1/api/servers", { name: "full" }), 409, "SERVER_LIMIT_REACHED");
    expect((await t.owner.delete(`/v1/api/servers/pending/${pending}`)).status).toBe(204);
    const connected = await t.connected();
    expectProblem(await t.owner.post("/v1/api/servers", { name: "full" }), 409, "SERVER_LIMIT_REACHED");
    expect((await t.owner.delete(`/v1/api/servers/${connected}`)).status).toBe(204);
    const again = await t.create();
    await grpcCheckIn(sys.internalUrl, again);
    expect((await t.owner.delete(`/v1/api/servers/permanent/${again}`)).status).toBe(204);
    await t.create();
  });

  it("a plan change reaches the limit: raising it frees slots, lowering it refuses creates", async () => {
    const t = await tenant({ serverLimit: 1n });
    await t.create();
    expectProblem(await t.owner.post("/v1/api/servers", { name: "x" }), 409, "SERVER_LIMIT_REACHED");
    await sys.admin.updateTenant({ tenantId: t.tenantId, serverLimit: 2n });
    // The new plan reaches the servers service as an event: a create is refused until it has.
    const res = await pollUntil(
      () => t.owner.post("/v1/api/servers", { name: "after raise" }),
      (r) => r.status !== 409,
      30_000,
    );
    expect(res.status, res.text).toBe(201);
    const usage = await sys.admin.getTenant({ tenantId: t.tenantId });
    expect(usage.tenant?.serversUsed).toBe(2n);
  });

  it("a key from before member binding gets ACTOR_BINDING_REQUIRED on every servers write; its reads keep working", async () => {
    const t = await tenant();
    const serverId = await t.connected("owned");
    const pendingId = await t.create("pending");
    const { key } = await t.mintKey(ALL_SCOPES, null);
    const unbound = t.api(key);
    expectProblem(await unbound.post("/v1/api/servers", { name: "nope" }), 403, "ACTOR_BINDING_REQUIRED");
    expectProblem(await unbound.patch(`/v1/api/servers/${serverId}`, { name: "nope" }), 403, "ACTOR_BINDING_REQUIRED");
    expectProblem(await unbound.delete(`/v1/api/servers/${serverId}`), 403, "ACTOR_BINDING_REQUIRED");
    expectProblem(await unbound.delete(`/v1/api/servers/permanent/${serverId}`), 403, "ACTOR_BINDING_REQUIRED");
    expectProblem(await unbound.delete(`/v1/api/servers/pending/${pendingId}`), 403, "ACTOR_BINDING_REQUIRED");
    expect((await unbound.get("/v1/api/servers")).body.servers.map((s: { id: string }) => s.id)).toEqual([serverId]);
    expect((await unbound.get("/v1/api/servers/pending")).body.pending).toEqual([
      expect.objectContaining({ serverId: pendingId, sourceServerId: null }),
    ]);
  });

  it("a change to the member takes effect on the very next request: removed, viewer, instance settings withdrawn", async () => {
    const t = await tenant();
    const serverId = await t.connected("target");
    const admin = await t.member(MemberRole.ADMIN);
    expect((await admin.api.patch(`/v1/api/servers/${serverId}`, { name: "by admin" })).status).toBe(200);

    await sys.admin.updateMember({ memberId: admin.memberId, instanceSettings: false });
    expectProblem(await admin.api.patch(`/v1/api/servers/${serverId}`, { name: "no" }), 403, "PERMISSION_DENIED");
    expect((await admin.api.get("/v1/api/servers")).status).toBe(200);
    await sys.admin.updateMember({ memberId: admin.memberId, instanceSettings: true });
    expect((await admin.api.patch(`/v1/api/servers/${serverId}`, { name: "again" })).status).toBe(200);

    await sys.admin.updateMember({ memberId: admin.memberId, role: MemberRole.VIEWER });
    expectProblem(await admin.api.post("/v1/api/servers", { name: "no" }), 403, "PERMISSION_DENIED");
    await sys.admin.updateMember({ memberId: admin.memberId, role: MemberRole.ADMIN });
    expect((await admin.api.delete(`/v1/api/servers/${serverId}`)).status).toBe(204);

    await sys.admin.removeMember({ memberId: admin.memberId });
    expectProblem(await admin.api.delete(`/v1/api/servers/permanent/${serverId}`), 403, "ACTOR_REMOVED");
    expectProblem(await admin.api.post("/v1/api/servers", { name: "no" }), 403, "ACTOR_REMOVED");
    expect((await t.entry(serverId)).name).toBe("again");
  });

  it("a member manages only its granted categories and servers; anything else is TARGET_ACCESS_DENIED", async () => {
    const t = await tenant();
    const granted = await category(t.tenantId, "granted");
    const other = await category(t.tenantId, "other");
    const inGranted = await t.connected("in-granted", { categoryId: granted });
    const inOther = await t.connected("in-other", { categoryId: other });
    const loose = await t.connected("loose");
    const member = await t.member(MemberRole.MEMBER);
    await sys.admin.grantMember({ memberId: member.memberId, categoryId: granted });

    expect((await member.api.patch(`/v1/api/servers/${inGranted}`, { name: "mine" })).status).toBe(200);
    expectProblem(await member.api.patch(`/v1/api/servers/${inOther}`, { name: "no" }), 403, "TARGET_ACCESS_DENIED");
    expectProblem(await member.api.delete(`/v1/api/servers/${loose}`), 403, "TARGET_ACCESS_DENIED");
    expect((await member.api.post("/v1/api/servers", { name: "new", categoryId: granted })).status).toBe(201);
    expectProblem(
      await member.api.post("/v1/api/servers", { name: "new", categoryId: other }),
      403,
      "TARGET_ACCESS_DENIED",
    );
    expectProblem(await member.api.post("/v1/api/servers", { name: "uncategorised" }), 403, "TARGET_ACCESS_DENIED");
    expectProblem(
      await member.api.post("/v1/api/servers", { name: "copy", sourceServerId: inOther, categoryId: granted }),
      403,
      "TARGET_ACCESS_DENIED",
    );

    await sys.admin.grantMember({ memberId: member.memberId, serverId: loose });
    expect((await member.api.delete(`/v1/api/servers/${loose}`)).status).toBe(204);
    const copy = await member.api.post("/v1/api/servers", { name: "copy", sourceServerId: inGranted });
    expect(copy.status).toBe(201);
    const pending = (await member.api.get("/v1/api/servers/pending")).body.pending.find(
      (p: { serverId: string }) => p.serverId === copy.body.serverId,
    );
    expect(pending).toMatchObject({ categoryId: granted, sourceServerId: null });
    const asOwner = (await t.owner.get("/v1/api/servers/pending")).body.pending.find(
      (p: { serverId: string }) => p.serverId === copy.body.serverId,
    );
    expect(asOwner.sourceServerId).toBe(inGranted);
  });

  it("deauthorising a deauthorised server changes nothing, and deauthorised servers refuse check-ins", async () => {
    const t = await tenant();
    const serverId = await t.connected("connected");
    expect((await t.owner.delete(`/v1/api/servers/${serverId}`)).status).toBe(204);
    expect((await t.owner.delete(`/v1/api/servers/${serverId}`)).status).toBe(204);
    expect(await t.entry(serverId)).toMatchObject({ state: "deauthorised", status: "offline" });
    await expect(grpcCheckIn(sys.internalUrl, serverId)).rejects.toMatchObject({
      details: expect.stringContaining("deauthorised"),
    });
    expect((await t.owner.patch(`/v1/api/servers/${serverId}`, { name: "renamed" })).body).toMatchObject({
      name: "renamed",
      state: "deauthorised",
    });
    expect((await t.owner.delete(`/v1/api/servers/permanent/${serverId}`)).status).toBe(204);
    await expect(grpcCheckIn(sys.internalUrl, serverId)).rejects.toMatchObject({ code: 5 });
  });

  it("replayctl recorder checkin and category create work", async () => {
    const t = await tenant();
    const serverId = await t.create();
    const at = new Date(Date.now() - 2 * MINUTE).toISOString();
    const out = await replayctl("recorder", "checkin", "--server", serverId, "--plugin-version", "9.9.9", "--at", at);
    expect(out).toEqual({ serverId, status: "online", lastSeenAt: at });
    const { categoryId } = await replayctl("category", "create", "--tenant", t.tenantId, "--name", "via-cli");
    expect((await t.owner.post("/v1/api/servers", { name: "in cli category", categoryId })).status).toBe(201);
  });

  async function category(tenantId: string, name: string): Promise<string> {
    return (await replayctl("category", "create", "--tenant", tenantId, "--name", name)).categoryId as string;
  }

  async function replayctl(...args: string[]): Promise<Record<string, string>> {
    const run = await runReplayctl(sys.internalUrl, args);
    expect(run.stderr).toBe("");
    return run.out;
  }
});

const distributed = sharedSystems().find((sys) => sys.mode === "distributed");

// Reaching into the system's NATS subjects and its services' own ports needs the distributed mode.
describe.skipIf(!distributed)("servers events (distributed mode; skipped: no distributed system in this run)", () => {
  const sys = distributed as SystemHandle;

  it("replayCount follows the replays recorded and deleted, in whatever order the events arrive", async () => {
    const t = await provisionTenant(sys);
    const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
      headers: t.bearer(),
      body: { name: "recorder" },
    });
    const serverId = created.body.serverId as string;
    await grpcCheckIn(sys.serviceUrls?.servers as string, serverId);
    const bus = await createNatsBus({ servers: testNatsUrl() as string, namespace: sys.natsNamespace });
    try {
      const [kept, deleted, deletedFirst] = [randomUUID(), randomUUID(), randomUUID()];
      const publish = (subject: EventSubject, bytes: Uint8Array, id = randomUUID()) => bus.publish(subject, id, bytes);
      const started = (replayId: string) =>
        toBinary(
          RecordingStartedSchema,
          create(RecordingStartedSchema, { eventId: randomUUID(), tenantId: t.tenantId, replayId, serverId }),
        );
      const gone = (replayId: string) =>
        toBinary(
          ReplayDeletedSchema,
          create(ReplayDeletedSchema, {
            eventId: randomUUID(),
            tenantId: t.tenantId,
            replayId,
            serverId,
            sizeBytes: 1n,
          }),
        );
      const startedKept = started(kept);
      await publish("replays.recording.started", startedKept);
      await publish("replays.recording.started", started(deleted));
      await publish("replays.replay.deleted", gone(deleted));
      await publish("replays.replay.deleted", gone(deletedFirst));
      await publish("replays.recording.started", started(deletedFirst));
      // A redelivered event (same payload, new broker id) is applied once: its event_id is in the inbox.
      await publish("replays.recording.started", startedKept);
      const count = async () =>
        (await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() })).body.servers[0]
          .replayCount as number;
      expect(await pollUntil(count, (n) => n === 1, 10_000)).toBe(1);
    } finally {
      await bus.close();
    }
  });

  it("publishes servers.server.created, connected, deauthorised and purged through the outbox", async () => {
    const t = await provisionTenant(sys);
    const bus = await createNatsBus({ servers: testNatsUrl() as string, namespace: sys.natsNamespace });
    const seen: { subject: string; serverId: string; tenantId: string }[] = [];
    const stop = await bus.subscribe(
      `test_${randomUUID().slice(0, 8).replaceAll("-", "")}`,
      ["servers.server.*"],
      async (msg) => {
        const event = decodeEvent(msg.subject as "servers.server.created", msg.data);
        seen.push({ subject: msg.subject, serverId: event.serverId, tenantId: event.tenantId });
      },
    );
    try {
      const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: "evented" },
      });
      const serverId = created.body.serverId as string;
      await grpcCheckIn(sys.serviceUrls?.servers as string, serverId);
      await send(sys.baseUrl, "DELETE", `/v1/api/servers/${serverId}`, { headers: t.bearer() });
      await send(sys.baseUrl, "DELETE", `/v1/api/servers/permanent/${serverId}`, { headers: t.bearer() });
      const mine = await pollUntil(
        async () => seen.filter((e) => e.serverId === serverId),
        (events) => events.length >= 4,
        10_000,
      );
      expect(mine.map((e) => e.subject).sort()).toEqual(
        [
          "servers.server.connected",
          "servers.server.created",
          "servers.server.deauthorised",
          "servers.server.purged",
        ].sort(),
      );
      expect(mine.every((e) => e.tenantId === t.tenantId)).toBe(true);
    } finally {
      await stop();
      await bus.close();
    }
  });

  it("answers a stock gRPC client on the servers service itself, and maps refusals to gRPC codes", async () => {
    await expect(grpcCheckIn(sys.serviceUrls?.servers as string, "not-a-uuid")).rejects.toMatchObject({ code: 3 });
    await expect(grpcCheckIn(sys.serviceUrls?.servers as string, randomUUID())).rejects.toMatchObject({ code: 5 });
  });
});
