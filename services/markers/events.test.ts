import { randomUUID } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createContextValues, type HandlerContext } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import type { CreateMarkerRequest } from "../../gen/replay/markers/v1/markers_pb.js";
import { createTestBus } from "../../lib/bus/_testing.js";
import { applyEvent, type Consumer, startConsumer } from "../../lib/bus/consumer.js";
import { buildEvent, type EventSubject, type OutgoingEvent } from "../../lib/bus/events.js";
import { createTestDb } from "../../lib/db/_testing.js";
import type { Queryable } from "../../lib/db/types.js";
import { kTenant } from "../../lib/rpc/context.js";
import { waitFor } from "../../test/poll.js";
import { projectedServerTarget as findServerTarget, ownerFromProjection, projectedReplay } from "./_testing.js";

import { markersConsumers } from "./events.js";
import { createMarkersService } from "./markers-service.js";
import * as store from "./store.js";

// The markers service's projections fed with events (through the real bus adapter for the wiring,
// and through the consumer runner in every order for the orderings), into the real schema (Postgres
// with DATABASE_URL, else embedded), and the service's creates decided against them.

async function setup() {
  const testDb = await createTestDb("markers");
  const testBus = await createTestBus(testDb.dbFor);
  const deps = { db: testDb.db, bus: testBus.bus, inboxMs: 86_400_000, now: () => new Date() };
  const service = createMarkersService({
    db: testDb.db,
    now: () => new Date(),
    resolveTarget: ownerFromProjection(testDb.db),
  });
  const consumerOf = (subject: EventSubject) => markersConsumers.find((c) => subject in c.handlers) as Consumer;
  return {
    db: testDb.db,
    bus: testBus,
    service,
    /** Applies events one after another, in this order, as the consumer runner does. */
    async apply(...events: OutgoingEvent[]) {
      for (const e of events)
        await applyEvent(deps, consumerOf(e.subject), { subject: e.subject, eventId: e.eventId, data: e.payload });
    },
    async subscribe() {
      return Promise.all(markersConsumers.map((consumer) => startConsumer(deps, consumer)));
    },
    async [Symbol.asyncDispose]() {
      await testBus[Symbol.asyncDispose]();
      await testDb[Symbol.asyncDispose]();
    },
  };
}

const ctxOf = (tenantId: string) => ({ values: createContextValues().set(kTenant, tenantId) }) as HandlerContext;
const request = (init: Partial<CreateMarkerRequest>) =>
  ({
    tick: 1n,
    label: "x",
    idempotencyKey: "",
    requestFingerprint: "",
    malformedFields: [],
    ...init,
  }) as CreateMarkerRequest;

/** The contract code a call fails with, or "OK". */
async function codeOf(call: unknown): Promise<string> {
  try {
    await call;
    return "OK";
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

/** Whether the projection has the tenant's replay, not deleted. */
const existsReplay = async (q: Queryable, tenantId: string, replayId: string) =>
  (await projectedReplay(q, tenantId, replayId)) !== undefined;

function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

function lifecycle(tenantId = randomUUID(), serverId = randomUUID(), replayId = randomUUID()) {
  const startedAt = timestampFromDate(new Date());
  return {
    tenantId,
    serverId,
    replayId,
    started: buildEvent("replays.recording.started", { tenantId, replayId, serverId, startedAt }),
    finished: buildEvent("replays.recording.finished", { tenantId, replayId, serverId, startedAt }),
    deleted: buildEvent("replays.replay.deleted", { tenantId, replayId, serverId }),
  };
}

describe("markers projections", () => {
  it("learns of replays and servers through the bus", async () => {
    await using ctx = await setup();
    const stops = await ctx.subscribe();
    try {
      const r = lifecycle();
      const connected = buildEvent("servers.server.connected", { tenantId: r.tenantId, serverId: r.serverId });
      for (const e of [connected, r.started]) await ctx.bus.emit(e.subject, e.eventId, e.payload);
      await waitFor(
        "the recording",
        async () => (await findServerTarget(ctx.db, r.tenantId, r.serverId)).replay_id === r.replayId,
      );
      const m = await ctx.service.createMarker(request({ serverId: r.serverId }), ctxOf(r.tenantId));
      expect(m.marker?.replayId).toBe(r.replayId);
      await ctx.bus.emit(r.deleted.subject, r.deleted.eventId, r.deleted.payload);
      await waitFor("the delete", async () => !(await existsReplay(ctx.db, r.tenantId, r.replayId)));
      expect(await store.listMarkersByReplay(ctx.db, r.tenantId, r.replayId)).toEqual([]);
    } finally {
      for (const stop of stops) await stop();
    }
  });

  it("ends with the same replay whatever order its start, finish and delete arrive in", async () => {
    await using ctx = await setup();
    for (const order of permutations(["started", "finished"] as const)) {
      const r = lifecycle();
      await ctx.apply(...order.map((name) => r[name]));
      expect(await existsReplay(ctx.db, r.tenantId, r.replayId), order.join()).toBe(true);
      expect(await findServerTarget(ctx.db, r.tenantId, r.serverId), order.join()).toEqual({
        state: null,
        replay_id: null,
      });
    }
    for (const order of permutations(["started", "finished", "deleted"] as const)) {
      const r = lifecycle();
      await ctx.apply(...order.map((name) => r[name]));
      expect(await existsReplay(ctx.db, r.tenantId, r.replayId), order.join()).toBe(false);
      expect((await findServerTarget(ctx.db, r.tenantId, r.serverId)).replay_id, order.join()).toBeNull();
    }
    // A delete before the start: the replay never records, and takes no marker.
    const r = lifecycle();
    await ctx.apply(r.deleted, r.started);
    expect(await codeOf(ctx.service.createMarker(request({ replayId: r.replayId }), ctxOf(r.tenantId)))).toBe(
      "REPLAY_NOT_FOUND",
    );
  });

  it("moves a server only forward, whatever order its events arrive in", async () => {
    await using ctx = await setup();
    const subjects = ["servers.server.created", "servers.server.connected", "servers.server.deauthorised"] as const;
    for (const withPurge of [false, true]) {
      const all = withPurge ? [...subjects, "servers.server.purged" as const] : subjects;
      for (const order of permutations(all)) {
        const tenantId = randomUUID();
        const serverId = randomUUID();
        await ctx.apply(...order.map((subject) => buildEvent(subject, { tenantId, serverId })));
        const { state } = await findServerTarget(ctx.db, tenantId, serverId);
        expect(state, order.join()).toBe(withPurge ? "purged" : "deauthorised");
      }
    }
  });

  it("pins by server id to the recording, unless the server is purged; the replay still takes markers by id", async () => {
    await using ctx = await setup();
    const r = lifecycle();
    const t = ctxOf(r.tenantId);
    // The recording arrives before the server's connect: the recording wins over the stale pending state.
    await ctx.apply(buildEvent("servers.server.created", { tenantId: r.tenantId, serverId: r.serverId }), r.started);
    expect((await ctx.service.createMarker(request({ serverId: r.serverId }), t)).marker?.replayId).toBe(r.replayId);
    // Another tenant knows neither.
    const other = ctxOf(randomUUID());
    expect(await codeOf(ctx.service.createMarker(request({ serverId: r.serverId }), other))).toBe("REPLAY_NOT_FOUND");
    expect(await codeOf(ctx.service.createMarker(request({ replayId: r.replayId }), other))).toBe("REPLAY_NOT_FOUND");
    await ctx.apply(buildEvent("servers.server.purged", { tenantId: r.tenantId, serverId: r.serverId }));
    expect(await codeOf(ctx.service.createMarker(request({ serverId: r.serverId }), t))).toBe("REPLAY_NOT_FOUND");
    expect(await codeOf(ctx.service.createMarker(request({ replayId: r.replayId }), t))).toBe("OK");
    // A connect that arrives after the purge does not bring the server back.
    await ctx.apply(buildEvent("servers.server.connected", { tenantId: r.tenantId, serverId: r.serverId }));
    expect(await codeOf(ctx.service.createMarker(request({ serverId: r.serverId }), t))).toBe("REPLAY_NOT_FOUND");

    const idle = lifecycle(r.tenantId);
    await ctx.apply(buildEvent("servers.server.connected", { tenantId: r.tenantId, serverId: idle.serverId }));
    expect(await codeOf(ctx.service.createMarker(request({ serverId: idle.serverId }), t))).toBe("NO_ACTIVE_RECORDING");
    await ctx.apply(
      idle.started,
      buildEvent("servers.server.deauthorised", { tenantId: r.tenantId, serverId: idle.serverId }),
    );
    expect(await codeOf(ctx.service.createMarker(request({ serverId: idle.serverId }), t))).toBe("NO_ACTIVE_RECORDING");
  });

  it("leaves no marker behind when creates race the replay's delete", async () => {
    await using ctx = await setup();
    for (let round = 0; round < 3; round++) {
      const r = lifecycle();
      await ctx.apply(r.started);
      const creates = Array.from({ length: 20 }, (_, i) =>
        codeOf(ctx.service.createMarker(request({ replayId: r.replayId, tick: BigInt(i) }), ctxOf(r.tenantId))),
      );
      const [, codes] = await Promise.all([ctx.apply(r.deleted), Promise.all(creates)]);
      expect(
        codes.every((code) => code === "OK" || code === "REPLAY_NOT_FOUND"),
        codes.join(),
      ).toBe(true);
      const { rows } = await ctx.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM markers.marker WHERE replay_id = $1",
        [r.replayId],
      );
      expect(rows[0]?.n).toBe(0);
    }
  });
});

describe("grouped creates", () => {
  it("admits creates up to the cap exactly, however they are grouped, on several replays and tenants at once", async () => {
    await using ctx = await setup();
    const a = lifecycle();
    const b = lifecycle();
    await ctx.apply(a.started, b.started);
    const createOn = (r: typeof a, tick: number, key = "") =>
      codeOf(
        ctx.service.createMarker(
          request({ replayId: r.replayId, tick: BigInt(tick), idempotencyKey: key, requestFingerprint: key }),
          ctxOf(r.tenantId),
        ),
      );
    const seeded = await Promise.all(Array.from({ length: 470 }, (_, i) => createOn(a, i)));
    expect(seeded.filter((code) => code !== "OK")).toEqual([]);
    // 60 creates on the full-soon replay (some with keys, which take their own transaction), 10 on
    // another replay, and 5 by a stranger to the replay, all at once.
    const codes = await Promise.all([
      ...Array.from({ length: 60 }, (_, i) => createOn(a, 1000 + i, i % 6 === 0 ? randomUUID() : "")),
      ...Array.from({ length: 10 }, (_, i) => createOn(b, i)),
      ...Array.from({ length: 5 }, () =>
        codeOf(ctx.service.createMarker(request({ replayId: a.replayId }), ctxOf(randomUUID()))),
      ),
    ]);
    const tally = (list: string[]) => {
      const counts: Record<string, number> = {};
      for (const code of list) counts[code] = (counts[code] ?? 0) + 1;
      return counts;
    };
    expect(tally(codes.slice(0, 60))).toEqual({ OK: 30, TOO_MANY_MARKERS: 30 });
    expect(tally(codes.slice(60, 70))).toEqual({ OK: 10 });
    expect(tally(codes.slice(70))).toEqual({ REPLAY_NOT_FOUND: 5 });
    expect(await store.listMarkersByReplay(ctx.db, a.tenantId, a.replayId)).toHaveLength(500);
    const { rows } = await ctx.db.query<{ marker_count: number }>(
      "SELECT marker_count FROM markers.replay WHERE replay_id = $1",
      [a.replayId],
    );
    expect(rows[0]?.marker_count).toBe(500);
  });
});
