import { randomUUID } from "node:crypto";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServerStatus } from "../../gen/replay/servers/v1/servers_pb.js";
import { preparedPlans, testDbModes } from "../../lib/db/_testing.js";
import type { Db } from "../../lib/db/types.js";
import { contractCodeOf, errorInterceptor } from "../../lib/rpc/errors.js";
import { foldCheckIns } from "./checkin.js";
import { createRecorderService } from "./recorder-service.js";
import * as store from "./store.js";

/**
 * A call that waits on another's row lock (a pool query inside a transaction) waits for ever; a
 * deadline this long tells that apart from a slow, busy machine without timing the calls.
 */
const DEADLOCK_MS = 15_000;

describe("foldCheckIns", () => {
  const at = (s: number) => new Date(s * 1000);

  it("leaves one check-in per server: the last time, and the last plugin version sent", () => {
    expect(
      foldCheckIns([
        { serverId: "a", at: at(3), pluginVersion: "1.0" },
        { serverId: "b", at: at(1), pluginVersion: "" },
        { serverId: "a", at: at(1), pluginVersion: "" },
        { serverId: "c", at: at(2), pluginVersion: "3.0" },
        { serverId: "a", at: at(2), pluginVersion: "" },
        { serverId: "c", at: at(5), pluginVersion: "3.1" },
      ]),
    ).toEqual([
      { serverId: "a", at: at(2), pluginVersion: "1.0" },
      { serverId: "b", at: at(1), pluginVersion: "" },
      { serverId: "c", at: at(5), pluginVersion: "3.1" },
    ]);
  });

  it("keeps a batch without repeated servers as it is", () => {
    const batch = [
      { serverId: "a", at: at(1), pluginVersion: "" },
      { serverId: "b", at: at(2), pluginVersion: "2.0" },
    ];
    expect(foldCheckIns(batch)).toEqual(batch);
    expect(foldCheckIns([])).toEqual([]);
  });
});

/** The real db, counting the batched check-in statements and the check-ins each carried. */
function countingBatches(db: Db): { db: Db; batches: number[] } {
  const batches: number[] = [];
  return {
    batches,
    db: {
      ...db,
      schema: db.schema,
      query(text, params) {
        if (text.includes("unnest(")) batches.push((params as unknown[][])[0]?.length ?? 0);
        return db.query(text, params);
      },
      transaction: (fn) => db.transaction(fn),
      listen: (channel, onNotify) => db.listen(channel, onNotify),
      close: () => db.close(),
    },
  };
}

// The recorder service's handlers behind the real error interceptor, on the real schema.
describe.each(testDbModes())("recorder check-in ($name database)", ({ name, open }) => {
  async function recorderOn(db: Db) {
    const tenantId = randomUUID();
    const insert = (state: "pending" | "connected" | "deauthorised") =>
      db.transaction(async (tx) => {
        const serverId = randomUUID();
        await store.insertServer(tx, { serverId, tenantId, name: state, categoryId: null, sourceServerId: null });
        if (state !== "pending") await store.updateServerConnected(tx, serverId, new Date(), "0.9");
        if (state === "deauthorised") await store.updateServerDeauthorised(tx, serverId);
        return serverId;
      });
    const counted = countingBatches(db);
    const recorder = createClient(
      RecorderService,
      createRouterTransport(
        (router) => router.service(RecorderService, createRecorderService({ db: counted.db, now: () => new Date() })),
        { router: { interceptors: [errorInterceptor] } },
      ),
    );
    return { tenantId, insert, recorder, batches: counted.batches };
  }

  it("connects a pending setup once when 20 first check-ins race, and answers every one (no call waits on another's lock)", async () => {
    await using testDb = await open("servers");
    const { db } = testDb;
    const { tenantId, insert, recorder } = await recorderOn(db);
    const serverId = await insert("pending");

    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        recorder.checkIn({ serverId, pluginVersion: "1.0.0" }, { signal: AbortSignal.timeout(DEADLOCK_MS) }),
      ),
    );
    expect(answers.map((answer) => answer.serverId)).toEqual(Array(20).fill(serverId));

    const { rows } = await db.query<{ subject: string }>("SELECT subject FROM servers.outbox");
    expect(rows).toEqual([{ subject: "servers.server.connected" }]);
    expect((await store.findServerById(db, tenantId, serverId))?.state).toBe("connected");
  });

  type Call = {
    serverId: string;
    pluginVersion?: string;
    at?: Date;
    expected: { code: Code; contract?: string } | "ok";
  };

  /** Sends the calls in one tick; asserts each outcome: ok (ONLINE, its own time) or its own error. */
  async function checkInAll(recorder: Awaited<ReturnType<typeof recorderOn>>["recorder"], calls: Call[]) {
    const outcomes = await Promise.allSettled(
      calls.map(({ serverId, pluginVersion, at }) =>
        recorder.checkIn({ serverId, pluginVersion, at: at ? timestampFromDate(at) : undefined }),
      ),
    );
    outcomes.forEach((outcome, i) => {
      const { serverId, at, expected } = calls[i] as Call;
      if (expected === "ok") {
        if (outcome.status === "rejected") throw new Error(`check-in ${i} failed: ${outcome.reason}`);
        const { lastSeenAt, ...rest } = outcome.value;
        expect(rest, `check-in ${i}`).toMatchObject({ serverId, status: ServerStatus.ONLINE });
        expect(lastSeenAt && timestampDate(lastSeenAt), `check-in ${i}`).toEqual(at);
      } else {
        expect(outcome.status, `check-in ${i}`).toBe("rejected");
        const err = ConnectError.from((outcome as PromiseRejectedResult).reason);
        expect({ code: err.code, contract: contractCodeOf(err)?.code }, `check-in ${i}`).toEqual(expected);
      }
    });
  }

  /** Times `s` seconds before `base`, exact to the millisecond as Postgres keeps them. */
  const secondsBefore = (base: number) => (s: number) => new Date(base - s * 1000);

  it("answers each check-in of one tick on its own: one statement for all, refusals fail alone", async () => {
    await using testDb = await open("servers");
    const { db } = testDb;
    const { tenantId, insert, recorder, batches } = await recorderOn(db);
    const connected = await Promise.all(Array.from({ length: 30 }, () => insert("connected")));
    const [repeated, lateVersion] = connected as [string, string];
    const pending = await insert("pending");
    const deauthorised = await insert("deauthorised");
    const unknown = randomUUID();
    const ago = secondsBefore(Date.now());

    const calls: Call[] = [
      ...connected.map((serverId, i) => ({ serverId, pluginVersion: `1.${i}`, at: ago(i), expected: "ok" as const })),
      // Repeated in the tick: as sequential check-ins would, each is answered with its own time.
      { serverId: repeated, pluginVersion: "", at: ago(100), expected: "ok" },
      { serverId: repeated, pluginVersion: "2.0", at: ago(50), expected: "ok" },
      { serverId: lateVersion, pluginVersion: "", at: ago(200), expected: "ok" },
      { serverId: pending, pluginVersion: "3.0", at: ago(30), expected: "ok" },
      { serverId: pending, pluginVersion: "", at: ago(20), expected: "ok" },
      { serverId: deauthorised, expected: { code: Code.FailedPrecondition, contract: "SERVER_DEAUTHORISED" } },
      { serverId: unknown, expected: { code: Code.NotFound, contract: "SERVER_NOT_FOUND" } },
      { serverId: "not-a-uuid", expected: { code: Code.InvalidArgument, contract: "INVALID_SERVER_ID" } },
      {
        serverId: deauthorised,
        pluginVersion: "4.0",
        expected: { code: Code.FailedPrecondition, contract: "SERVER_DEAUTHORISED" },
      },
    ];
    await checkInAll(recorder, calls);

    const row = async (serverId: string) => store.findServerById(db, tenantId, serverId);
    // The rows hold what the check-ins leave when they run one after another in the order sent.
    expect(await row(repeated)).toMatchObject({ last_seen_at: ago(50), plugin_version: "2.0" });
    expect(await row(lateVersion)).toMatchObject({ last_seen_at: ago(200), plugin_version: "1.1" });
    expect(await row(connected[29] as string)).toMatchObject({ last_seen_at: ago(29), plugin_version: "1.29" });
    expect(await row(pending)).toMatchObject({ state: "connected", last_seen_at: ago(20), plugin_version: "3.0" });
    expect(await row(deauthorised)).toMatchObject({ state: "deauthorised", plugin_version: "0.9" });
    const { rows } = await db.query<{ subject: string }>("SELECT subject FROM servers.outbox");
    expect(rows).toEqual([{ subject: "servers.server.connected" }]);
    // One statement for the tick: each server once.
    expect(batches).toEqual([connected.length + 3]);
  });

  // Embedded mode sends unnamed statements: nothing is cached there to plan again or not.
  it.skipIf(name !== "postgres")(
    "plans the batch statement once: its prepared statement settles on the generic plan whatever the batch sizes",
    async () => {
      await using testDb = await open("servers");
      const { db } = testDb;
      const { insert, tenantId } = await recorderOn(db);
      const ids = await Promise.all(Array.from({ length: 3 }, () => insert("connected")));
      // A fleet's worth of rows, analysed: on a near-empty table every plan costs about the same.
      await db.query(
        `INSERT INTO servers.server (server_id, tenant_id, name, state, last_seen_at)
         SELECT gen_random_uuid(), $1, 'fleet-' || i, 'connected', now() FROM generate_series(1, 10000) AS i`,
        [tenantId],
      );
      await db.query("ANALYZE servers.server");
      const plans = await db.transaction(async (tx) => {
        // One connection; batches of one to three, the small ones a custom plan is estimated cheapest for.
        for (let i = 0; i < 12; i++) {
          const batch = ids.slice(0, 1 + (i % 3)).map((serverId) => ({ serverId, at: new Date(), pluginVersion: "" }));
          expect(await store.updateServersSeen(tx, batch)).toEqual(new Set(batch.map((c) => c.serverId)));
        }
        return preparedPlans(tx, "AS c (server_id, at, plugin_version)");
      });
      // Postgres tries five custom plans before it compares; every execution after them is generic.
      expect(plans).toEqual([{ generic: 7, custom: 5 }]);
    },
  );

  it("fails a check-in whose value Postgres refuses alone, with the error it gets on its own (no text guard here)", async () => {
    await using testDb = await open("servers");
    const { db } = testDb;
    const { tenantId, insert, recorder, batches } = await recorderOn(db);
    const connected = await Promise.all(Array.from({ length: 6 }, () => insert("connected")));
    const [first, nul, ancient] = connected as [string, string, string];
    const ago = secondsBefore(Date.now());
    const calls: Call[] = [
      ...connected.map((serverId, i) => ({ serverId, pluginVersion: `1.${i}`, at: ago(i), expected: "ok" as const })),
      { serverId: nul, pluginVersion: "nul\u0000", expected: { code: Code.Internal } },
      // Outside Timestamp's range: refused before it reaches a batch.
      {
        serverId: ancient,
        at: new Date(-8.6e15),
        expected: { code: Code.InvalidArgument, contract: "INVALID_ARGUMENT" },
      },
      { serverId: first, pluginVersion: "2.0", at: ago(10), expected: "ok" },
    ];
    await checkInAll(recorder, calls);

    const row = async (serverId: string) => store.findServerById(db, tenantId, serverId);
    expect(await row(first)).toMatchObject({ last_seen_at: ago(10), plugin_version: "2.0" });
    expect(await row(nul)).toMatchObject({ last_seen_at: ago(1), plugin_version: "1.1" });
    expect(await row(ancient)).toMatchObject({ last_seen_at: ago(2), plugin_version: "1.2" });
    // The tick's statement failed on the refused value; then each check-in of it ran alone, in order.
    expect(batches).toEqual([connected.length, ...Array(calls.length - 1).fill(1)]);
  });
});
