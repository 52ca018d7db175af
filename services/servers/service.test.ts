import { randomUUID } from "node:crypto";
import type { ConnectRouter } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import { RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServerState, ServerStatus, ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import { createTestDb } from "../../lib/db/_testing.js";
import type { OwnedPlan } from "../../lib/plan-owner.js";
import { asCaller, contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { createRecorderService } from "./recorder-service.js";
import { createServersService } from "./servers-service.js";
import * as store from "./store.js";

// What the servers service does, call by call: its two RPC services (ServersService for the
// management API, RecorderService for the recorders' check-ins) served in this process on the
// real schema. The public API's answers for the same calls are test/servers.test.ts and
// test/checkin.test.ts.

const owner = { memberId: randomUUID(), role: MemberRole.OWNER, instanceSettings: true };

async function serversOn(serverLimit: number) {
  const testDb = await createTestDb("servers");
  const { db } = testDb;
  const tenantId = randomUUID();
  // The plan as identity.tenant.upserted leaves it in this service's projection (events.ts).
  await db.transaction((tx) => store.upsertTenantPlan(tx, { tenantId, serverLimit, version: 1 }));
  // The gateway's answer for a tenant's plan this projection has not heard of (lib/plan-owner.ts).
  const plans = new Map<string, OwnedPlan>();
  const deps = { db, now: () => new Date(), lookupPlan: async (id: string) => plans.get(id) };
  const routes = (router: ConnectRouter) => {
    router.service(ServersService, createServersService(deps));
    router.service(RecorderService, createRecorderService(deps));
  };
  return {
    testDb,
    tenantId,
    plans,
    servers: inMemoryClient(ServersService, routes),
    recorder: inMemoryClient(RecorderService, routes),
    as: asCaller({ tenantId, actor: owner }),
  };
}

describe("servers service", () => {
  it("a pending setup takes a slot, connects on its first check-in and is then listed online", async () => {
    const { testDb, servers, recorder, as } = await serversOn(2);
    await using _ = testDb;

    const { setup } = await servers.createPendingSetup({ name: "lobby" }, as);
    const serverId = setup?.serverId ?? "";
    expect(setup?.name).toBe("lobby");
    expect((await servers.listPendingSetups({}, as)).pending.map((p) => p.serverId)).toEqual([serverId]);
    expect((await servers.listServers({}, as)).servers).toEqual([]);
    expect(await servers.getSlotUsage({}, as)).toMatchObject({ serversUsed: 1n, serverLimit: 2n });

    const answer = await recorder.checkIn({ serverId, pluginVersion: "1.2.0" });
    expect(answer).toMatchObject({ serverId, status: ServerStatus.ONLINE });

    expect((await servers.listPendingSetups({}, as)).pending).toEqual([]);
    const [server] = (await servers.listServers({}, as)).servers;
    expect(server).toMatchObject({
      serverId,
      name: "lobby",
      status: ServerStatus.ONLINE,
      state: ServerState.CONNECTED,
      pluginVersion: "1.2.0",
    });
  });

  it("refuses a setup over the plan's limit, and a member whose role cannot manage servers", async () => {
    const { testDb, tenantId, servers, as } = await serversOn(1);
    await using _ = testDb;

    await servers.createPendingSetup({ name: "one" }, as);
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "two" }, as))).toBe("SERVER_LIMIT_REACHED");
    const viewer = asCaller({ tenantId, actor: { memberId: randomUUID(), role: MemberRole.VIEWER } });
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "three" }, viewer))).toBe("PERMISSION_DENIED");
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "four" }))).toBe("UNAUTHENTICATED");
  });

  it("renames and deauthorises a server; a deauthorised server's check-in is refused, and a purged one is gone", async () => {
    const { testDb, servers, recorder, as } = await serversOn(5);
    await using _ = testDb;
    const { setup } = await servers.createPendingSetup({ name: "old" }, as);
    const serverId = setup?.serverId ?? "";
    await recorder.checkIn({ serverId });

    expect((await servers.renameServer({ serverId, name: "new" }, as)).server?.name).toBe("new");
    await servers.deauthoriseServer({ serverId }, as);
    expect((await servers.listServers({}, as)).servers[0]?.state).toBe(ServerState.DEAUTHORISED);
    expect(await contractCodeOfCall(recorder.checkIn({ serverId }))).toBe("SERVER_DEAUTHORISED");

    await servers.purgeServer({ serverId }, as);
    expect((await servers.listServers({}, as)).servers).toEqual([]);
    expect(await contractCodeOfCall(recorder.checkIn({ serverId }))).toBe("SERVER_NOT_FOUND");
    expect(await contractCodeOfCall(servers.purgeServer({ serverId }, as))).toBe("SERVER_NOT_FOUND");
  });

  it("cancels a pending setup, freeing its slot at once", async () => {
    const { testDb, servers, as } = await serversOn(1);
    await using _ = testDb;
    const { setup } = await servers.createPendingSetup({ name: "soon" }, as);

    await servers.cancelPendingSetup({ serverId: setup?.serverId ?? "" }, as);
    expect(await servers.getSlotUsage({}, as)).toMatchObject({ serversUsed: 0n, serverLimit: 1n });
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "next" }, as))).toBe("OK");
  });

  it("creates categories and lists them a page at a time; a setup in an unknown category is refused", async () => {
    const { testDb, servers, as } = await serversOn(5);
    await using _ = testDb;
    const names = ["a", "b", "c"];
    const created = [];
    for (const name of names) created.push((await servers.createCategory({ name }, as)).category?.categoryId);

    const first = await servers.listCategories({ pageSize: 2 }, as);
    const second = await servers.listCategories({ pageSize: 2, pageToken: first.nextPageToken }, as);
    expect(first.nextPageToken).not.toBe("");
    expect(second.nextPageToken).toBe("");
    const listed = [...first.categories, ...second.categories];
    expect(listed.map((c) => c.categoryId).sort()).toEqual([...created].sort());
    expect(listed.map((c) => c.name).sort()).toEqual(names);

    const { setup } = await servers.createPendingSetup({ name: "filed", categoryId: created[0] }, as);
    expect(setup?.categoryId).toBe(created[0]);
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "lost", categoryId: randomUUID() }, as))).toBe(
      "CATEGORY_NOT_FOUND",
    );
  });
  it("sets up the first server of a tenant whose plan it has not heard of yet, on the gateway's word", async () => {
    const { testDb, servers, plans } = await serversOn(1);
    await using _ = testDb;
    const fresh = randomUUID();
    const as = asCaller({ tenantId: fresh, actor: owner });
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "first" }, as))).toBe("SERVICE_UNAVAILABLE");
    plans.set(fresh, { serverLimit: 1n, storageQuotaBytes: 1n, version: 3n, retentionDays: 90, hotDays: 30 });
    expect((await servers.createPendingSetup({ name: "first" }, as)).setup?.name).toBe("first");
    // The plan is known from then on, and its limit holds.
    expect(await store.findTenantPlan(testDb.db, fresh)).toEqual({ server_limit: 1 });
    expect(await contractCodeOfCall(servers.createPendingSetup({ name: "second" }, as))).toBe("SERVER_LIMIT_REACHED");
  });
});
