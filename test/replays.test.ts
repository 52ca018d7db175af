import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeEvent } from "../lib/bus/events.js";
import type { Db } from "../lib/db/types.js";
import { provisionTenant, type Res, send, sendSigned } from "./http.js";
import { useInProcessSystem } from "./in-process.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";

// The replays read and delete API through the gateway (spec "Replays", decisions.md §5 and §7).
// The tests that need many replays in given states seed replays.replay (and replays.tenant) with
// SQL, faster and more exact than recording each (test/recording.test.ts covers the recording API). The rules that need no replay run on
// both shared systems; the seeded ones run in full on the distributed system, whose database the
// test reaches, and again (without inserts between pages) on an in-process system on the embedded
// database, seeded while it runs (the last describe). Every refusal's status and code, and another
// tenant's replays: gateway/routes/replays.test.ts.

function expectProblem(res: Res, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.code }, res.text).toEqual({ status, code });
  expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
}

type Seed = {
  replayId?: string;
  serverId?: string;
  integration?: string;
  quality?: "standard" | "hd";
  status?: "recording" | "processing" | "ready" | "failed" | "expired";
  startedAt?: string;
  endedAt?: string | null;
  durationMs?: number | null;
  sizeBytes?: number | null;
  formatVersion?: number | null;
  storageTier?: "hot" | "cold";
  retentionUntil?: string;
  visibility?: "staff" | "public";
  archiveKey?: string | null;
};

const EMPTY_PAGE = { results: [], next_page_token: "", page_size: 20 };

/** The ReplayMetadata of a seeded recording in progress: what is not known yet is null. */
function recordingMetadata(id: string | undefined, serverId: unknown, startedAt: string) {
  return {
    id,
    server_id: serverId,
    integration: "rust",
    quality: "standard",
    started_at: startedAt,
    ended_at: null,
    duration_ms: null,
    size_bytes: null,
    storage_tier: "hot",
    retention_until: "2127-01-01T00:00:00.000Z",
    visibility: "staff",
    format_version: null,
    status: "recording",
  };
}

/** Where seeds go: a pg pool on the distributed system's database, or the in-process system's embedded one. */
type Sql = { query(text: string, params?: unknown[]): Promise<unknown> };

// Seeded times lie a century ahead: the running system's retention worker moves replays older than
// the hot period to cold and expires those past retention_until, which would change seeded rows
// under the tests' feet (and, with real dates, the day those dates pass).
let clock = Date.parse("2126-01-01T00:00:00.000Z");
/** A distinct, increasing start time per call: newer replays for later seeds. */
const nextStart = () => {
  clock += 60_000;
  return new Date(clock).toISOString();
};

async function seed(db: Sql, tenantId: string, s: Seed = {}): Promise<string> {
  const replayId = s.replayId ?? randomUUID();
  const status = s.status ?? "ready";
  const recording = status === "recording";
  const startedAt = s.startedAt ?? nextStart();
  await db.query(
    `INSERT INTO replays.replay (replay_id, tenant_id, server_id, integration, quality, status, pipeline,
       started_at, ended_at, duration_ms, size_bytes, format_version, storage_tier, retention_until, visibility,
       archive_key, hot_until)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $14)`,
    [
      replayId,
      tenantId,
      s.serverId ?? randomUUID(),
      s.integration ?? "rust",
      s.quality ?? "standard",
      status,
      recording ? "none" : "ended",
      startedAt,
      s.endedAt !== undefined ? s.endedAt : recording ? null : new Date(Date.parse(startedAt) + 5_000).toISOString(),
      s.durationMs !== undefined ? s.durationMs : recording ? null : 5_000,
      s.sizeBytes !== undefined ? s.sizeBytes : recording ? null : 1_000,
      s.formatVersion !== undefined ? s.formatVersion : recording ? null : 1,
      s.storageTier ?? "hot",
      s.retentionUntil ?? "2127-01-01T00:00:00.000Z",
      s.visibility ?? "staff",
      s.archiveKey !== undefined ? s.archiveKey : recording ? null : `tenant/${tenantId}/replay/${replayId}.rpl`,
    ],
  );
  return replayId;
}

async function setStorage(db: Sql, tenantId: string, usedBytes: number, quotaBytes = 1_000_000): Promise<void> {
  await db.query(
    `INSERT INTO replays.tenant (tenant_id, storage_quota_bytes, plan_version, storage_used_bytes)
     VALUES ($1, $2, 1, $3)
     ON CONFLICT (tenant_id) DO UPDATE SET storage_used_bytes = $3, storage_quota_bytes = $2`,
    [tenantId, quotaBytes, usedBytes],
  );
}

describe.each(sharedSystems())("replays ($mode mode)", (sys) => {
  const tenant = async () => {
    const t = await provisionTenant(sys);
    return {
      ...t,
      signed: (method: string, path: string) => sendSigned(sys.baseUrl, t.signer, method, path),
      api: (path: string) => send(sys.baseUrl, "GET", path, { headers: t.bearer() }),
    };
  };

  describe("without replays", () => {
    it("lists a new tenant's empty first page on both routes", async () => {
      const t = await tenant();
      for (const res of [await t.signed("GET", "/v1/replays"), await t.api("/v1/api/replays")]) {
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual(EMPTY_PAGE);
      }
      const sized = await t.signed("GET", `/v1/replays?page_size=3&server_id=${randomUUID()}&integration=x`);
      expect(sized.body).toEqual({ ...EMPTY_PAGE, page_size: 3 });
    });

    it("reports no storage used for a tenant without replays", async () => {
      const t = await tenant();
      const { tenant: shown } = await sys.admin.getTenant({ tenantId: t.tenantId });
      expect(shown?.storageUsedBytes).toBe(0n);
    });
  });

  // Reads and writes the replays schema, which only the distributed system exposes to the test.
  describe.skipIf(!sys.databaseUrl)("with seeded replays (distributed only)", () => {
    let db: pg.Pool;
    beforeAll(() => {
      db = new pg.Pool({ connectionString: sys.databaseUrl, max: 2 });
    });
    afterAll(() => db.end());

    /** Every page of a list, following next_page_token; `between` runs before each later page. */
    async function allPages(
      get: (path: string) => Promise<Res>,
      path: string,
      between: (page: number) => Promise<void> = async () => {},
    ): Promise<{ ids: string[]; pages: Res[] }> {
      const ids: string[] = [];
      const pages: Res[] = [];
      let token = "";
      for (let page = 0; page < 50; page++) {
        if (page > 0) await between(page);
        const sep = path.includes("?") ? "&" : "?";
        const res = await get(token === "" ? path : `${path}${sep}page_token=${token}`);
        expect(res.status, res.text).toBe(200);
        pages.push(res);
        ids.push(...res.body.results.map((r: { id: string }) => r.id));
        token = res.body.next_page_token;
        if (token === "") return { ids, pages };
      }
      throw new Error("more than 50 pages");
    }

    it("returns every ReplayMetadata field plus status, null when unset, for a recording and a finished replay", async () => {
      const t = await tenant();
      const serverId = randomUUID();
      const finished = await seed(db, t.tenantId, {
        serverId,
        integration: "Minecraft",
        quality: "hd",
        status: "ready",
        startedAt: "2126-02-01T10:00:00.123Z",
        endedAt: "2126-02-01T10:30:00.456Z",
        durationMs: 1_800_333,
        sizeBytes: 123_456_789_012,
        formatVersion: 3,
        storageTier: "cold",
        retentionUntil: "2126-05-01T00:00:00.000Z",
        visibility: "public",
      });
      const recording = await seed(db, t.tenantId, {
        serverId,
        status: "recording",
        startedAt: "2126-02-02T00:00:00.000Z",
      });
      const finishedBody = {
        id: finished,
        server_id: serverId,
        integration: "Minecraft",
        quality: "hd",
        started_at: "2126-02-01T10:00:00.123Z",
        ended_at: "2126-02-01T10:30:00.456Z",
        duration_ms: 1_800_333,
        size_bytes: 123_456_789_012,
        storage_tier: "cold",
        retention_until: "2126-05-01T00:00:00.000Z",
        visibility: "public",
        format_version: 3,
        status: "ready",
      };
      const recordingBody = recordingMetadata(recording, serverId, "2126-02-02T00:00:00.000Z");
      const got = await t.signed("GET", `/v1/replays/${finished.toUpperCase()}`);
      expect(got.status, got.text).toBe(200);
      expect(got.body).toStrictEqual(finishedBody);
      expect((await t.api(`/v1/api/replays/${recording}`)).body).toStrictEqual(recordingBody);
      const list = await t.signed("GET", "/v1/replays");
      expect(list.body).toStrictEqual({ results: [recordingBody, finishedBody], next_page_token: "", page_size: 20 });
    });

    it("lists newest first, then by id descending, with next_page_token empty exactly on the last page", async () => {
      const t = await tenant();
      const sameStart = "2126-03-01T00:00:00.000Z";
      const tied = [
        await seed(db, t.tenantId, { startedAt: sameStart }),
        await seed(db, t.tenantId, { startedAt: sameStart }),
      ];
      // Microseconds apart: finer than a millisecond, still ordered and paged exactly.
      const micro = [
        await seed(db, t.tenantId, { startedAt: "2126-03-02T00:00:00.000001Z" }),
        await seed(db, t.tenantId, { startedAt: "2126-03-02T00:00:00.000002Z" }),
      ];
      const older = await seed(db, t.tenantId, { startedAt: "2126-01-15T00:00:00.000Z" });
      const expected = [micro[1], micro[0], ...[...tied].sort().reverse(), older];

      const whole = await t.signed("GET", "/v1/replays");
      expect(whole.body.results.map((r: { id: string }) => r.id)).toEqual(expected);
      expect(whole.body.next_page_token).toBe("");

      for (const size of [1, 2, 4, 5]) {
        const { ids, pages } = await allPages((p) => t.signed("GET", p), `/v1/replays?page_size=${size}`);
        expect(ids, `page_size ${size}`).toEqual(expected);
        expect(pages.map((p) => p.body.page_size)).toEqual(pages.map(() => size));
        // Exactly when no replay follows: 5 replays in pages of 5 is one page, not a trailing empty one.
        expect(pages).toHaveLength(Math.ceil(expected.length / size));
      }
      const api = await allPages((p) => t.api(p), "/v1/api/replays?page_size=2");
      expect(api.ids).toEqual(expected);
    });

    it("pages through inserts and deletes between pages without skipping or repeating a replay", async () => {
      const t = await tenant();
      const initial: string[] = [];
      for (let i = 0; i < 9; i++) initial.push(await seed(db, t.tenantId));
      const newestFirst = [...initial].reverse();
      const deleted = new Set<string>();
      const { ids } = await allPages(
        (p) => t.signed("GET", p),
        "/v1/replays?page_size=3",
        async (page) => {
          // A newer replay (before the position) and a deletion both before and after it.
          await seed(db, t.tenantId);
          const gone = page === 1 ? [newestFirst[0], newestFirst[5]] : [newestFirst[7]];
          for (const id of gone as string[]) {
            const res = await t.signed("DELETE", `/v1/replays/${id}`);
            expect(res.status, res.text).toBe(204);
            deleted.add(id);
          }
        },
      );
      expect(new Set(ids).size).toBe(ids.length);
      // Every replay that existed throughout is seen exactly once, in order; newer ones are not.
      const survivors = newestFirst.filter((id) => !deleted.has(id));
      expect(ids.filter((id) => survivors.includes(id))).toEqual(survivors);
      expect(ids).not.toContain(newestFirst[5]);
      expect(ids).not.toContain(newestFirst[7]);
    });

    it("binds page tokens to the tenant, the route and the filters; page_size may change between pages", async () => {
      const t = await tenant();
      const other = await tenant();
      const serverId = randomUUID();
      for (let i = 0; i < 3; i++) await seed(db, t.tenantId, { serverId, integration: "rust" });
      for (let i = 0; i < 3; i++) await seed(db, other.tenantId, { serverId: randomUUID(), integration: "rust" });
      const first = await t.signed("GET", `/v1/replays?page_size=1&server_id=${serverId}`);
      const token = first.body.next_page_token as string;
      expect(token).not.toBe("");

      const resized = await t.signed("GET", `/v1/replays?page_size=2&server_id=${serverId}&page_token=${token}`);
      expect(resized.status, resized.text).toBe(200);
      expect(resized.body.results).toHaveLength(2);
      expect(resized.body.next_page_token).toBe("");
      const refusals = [
        ["other tenant", other.signed("GET", `/v1/replays?server_id=${serverId}&page_token=${token}`)],
        ["other route", t.api(`/v1/api/replays?server_id=${serverId}&page_token=${token}`)],
        ["filter dropped", t.signed("GET", `/v1/replays?page_token=${token}`)],
        ["other server", t.signed("GET", `/v1/replays?server_id=${randomUUID()}&page_token=${token}`)],
        ["filter added", t.signed("GET", `/v1/replays?server_id=${serverId}&integration=rust&page_token=${token}`)],
        ["tampered", t.signed("GET", `/v1/replays?server_id=${serverId}&page_token=${token.slice(0, -2)}AA`)],
      ] as const;
      for (const [why, request] of refusals) {
        const res = await request;
        expect({ why, status: res.status, code: res.body?.code }).toEqual({
          why,
          status: 400,
          code: "INVALID_PAGE_TOKEN",
        });
      }
      // The server id's case does not change the binding: it is the same filter.
      const upper = await t.signed(
        "GET",
        `/v1/replays?page_size=1&server_id=${serverId.toUpperCase()}&page_token=${token}`,
      );
      expect(upper.status, upper.text).toBe(200);
    });

    it("filters by server_id and by integration (exact, case-sensitive), combined", async () => {
      const t = await tenant();
      const [a, b] = [randomUUID(), randomUUID()];
      const aRust = await seed(db, t.tenantId, { serverId: a, integration: "rust" });
      const aGmod = await seed(db, t.tenantId, { serverId: a, integration: "gmod" });
      const bRust = await seed(db, t.tenantId, { serverId: b, integration: "rust" });
      const bRustUpper = await seed(db, t.tenantId, { serverId: b, integration: "Rust" });
      const other = await tenant();
      await seed(db, other.tenantId, { serverId: a, integration: "rust" });
      const ids = async (query: string) => {
        const signed = await t.signed("GET", `/v1/replays${query}`);
        const api = await t.api(`/v1/api/replays${query}`);
        expect(signed.status, signed.text).toBe(200);
        expect(api.body.results).toEqual(signed.body.results);
        return signed.body.results.map((r: { id: string }) => r.id);
      };
      expect(await ids("")).toEqual([bRustUpper, bRust, aGmod, aRust]);
      expect(await ids(`?server_id=${a}`)).toEqual([aGmod, aRust]);
      expect(await ids(`?server_id=${a.toUpperCase()}`)).toEqual([aGmod, aRust]);
      expect(await ids("?integration=rust")).toEqual([bRust, aRust]);
      expect(await ids("?integration=Rust")).toEqual([bRustUpper]);
      expect(await ids(`?server_id=${b}&integration=rust`)).toEqual([bRust]);
      expect(await ids(`?server_id=${randomUUID()}`)).toEqual([]);
      expect(await ids("?integration=")).toEqual([]);
      const paged = await allPages((p) => t.signed("GET", p), "/v1/replays?integration=rust&page_size=1");
      expect(paged.ids).toEqual([bRust, aRust]);
    });

    it("deletes a replay for good: 204, storage freed, archive queued and removed, events emitted, then 404", async () => {
      const t = await tenant();
      const serverId = randomUUID();
      const replayId = await seed(db, t.tenantId, { serverId, sizeBytes: 4_000, status: "ready" });
      const kept = await seed(db, t.tenantId, { serverId, sizeBytes: 1_000 });
      await setStorage(db, t.tenantId, 5_000);
      const archiveKey = `tenant/${t.tenantId}/replay/${replayId}.rpl`;

      const res = await t.signed("DELETE", `/v1/replays/${replayId}`);
      expect(res.status, res.text).toBe(204);
      expect(res.text).toBe("");
      expectProblem(await t.signed("GET", `/v1/replays/${replayId}`), 404, "REPLAY_NOT_FOUND");
      expectProblem(await t.signed("DELETE", `/v1/replays/${replayId}`), 404, "REPLAY_NOT_FOUND");
      expect((await t.signed("GET", "/v1/replays")).body.results.map((r: { id: string }) => r.id)).toEqual([kept]);
      const { tenant: shown } = await sys.admin.getTenant({ tenantId: t.tenantId });
      expect(shown?.storageUsedBytes).toBe(1_000n);

      const { rows } = await db.query<{ subject: string; payload: Buffer }>(
        "SELECT subject, payload FROM replays.outbox ORDER BY id",
      );
      const mine = rows
        .filter((r) => r.subject === "replays.replay.deleted" || r.subject === "replays.asset.deleted")
        .map((r) =>
          r.subject === "replays.replay.deleted"
            ? { subject: r.subject, event: decodeEvent("replays.replay.deleted", r.payload) }
            : { subject: r.subject, event: decodeEvent("replays.asset.deleted", r.payload) },
        )
        .filter(({ event }) => ("replayId" in event ? event.replayId : event.asset?.replayId) === replayId);
      expect(mine.map((m) => m.subject)).toEqual(["replays.replay.deleted", "replays.asset.deleted"]);
      expect(mine[0]?.event).toMatchObject({ tenantId: t.tenantId, replayId, serverId, sizeBytes: 4_000n });
      expect(mine[1]?.event).toMatchObject({
        tenantId: t.tenantId,
        asset: { id: replayId, replayId, serverId, state: "deleted", status: "ready", sizeBytes: 4_000n },
      });

      // The archive's queue entry is drained by the worker once the blob store confirmed.
      await pollUntil(
        async () =>
          (await db.query("SELECT 1 FROM replays.blob_deletion WHERE archive_key = $1", [archiveKey])).rowCount,
        (n) => n === 0,
        20_000,
        200,
      );
    });

    it("answers two deletes racing on one replay with one 204 and one 404, emitting the events once", async () => {
      const t = await tenant();
      const replayId = await seed(db, t.tenantId, { sizeBytes: 700 });
      await setStorage(db, t.tenantId, 700);
      const answers = await Promise.all([
        t.signed("DELETE", `/v1/replays/${replayId}`),
        t.signed("DELETE", `/v1/replays/${replayId}`),
      ]);
      expect(answers.map((r) => r.status).sort()).toEqual([204, 404]);
      expect((await sys.admin.getTenant({ tenantId: t.tenantId })).tenant?.storageUsedBytes).toBe(0n);
      const { rows } = await db.query<{ payload: Buffer }>(
        "SELECT payload FROM replays.outbox WHERE subject = 'replays.replay.deleted'",
      );
      const events = rows.filter((r) => decodeEvent("replays.replay.deleted", r.payload).replayId === replayId);
      expect(events).toHaveLength(1);
    });

    it("deletes a recording in progress, and an expired replay without freeing storage twice", async () => {
      const t = await tenant();
      const recording = await seed(db, t.tenantId, { status: "recording" });
      const expired = await seed(db, t.tenantId, { status: "expired", sizeBytes: 2_000, archiveKey: null });
      const ready = await seed(db, t.tenantId, { sizeBytes: 3_000 });
      await setStorage(db, t.tenantId, 3_000);
      for (const id of [recording, expired]) {
        const res = await t.signed("DELETE", `/v1/replays/${id}`);
        expect(res.status, res.text).toBe(204);
      }
      expect((await sys.admin.getTenant({ tenantId: t.tenantId })).tenant?.storageUsedBytes).toBe(3_000n);
      expect((await t.signed("DELETE", `/v1/replays/${ready}`)).status).toBe(204);
      expect((await sys.admin.getTenant({ tenantId: t.tenantId })).tenant?.storageUsedBytes).toBe(0n);
      expect((await t.signed("GET", "/v1/replays")).body).toEqual(EMPTY_PAGE);
    });

    it("a delete lowers the server's replayCount (the servers projection consumes replays.replay.deleted)", async () => {
      const t = await tenant();
      const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: `srv-${randomUUID().slice(0, 8)}` },
      });
      expect(created.status, created.text).toBe(201);
      const serverId = created.body.serverId as string;
      await grpcCheckIn(sys.internalUrl, serverId);
      const replayId = await seed(db, t.tenantId, { serverId });
      // Stands in for replays.recording.started, which the recording RPCs will publish.
      await db.query("INSERT INTO servers.replay (replay_id, server_id) VALUES ($1, $2)", [replayId, serverId]);
      const count = async () =>
        (await t.api("/v1/api/servers")).body.servers.find((s: { id: string }) => s.id === serverId)?.replayCount;
      expect(await count()).toBe(1);
      expect((await t.signed("DELETE", `/v1/replays/${replayId}`)).status).toBe(204);
      await pollUntil(count, (n) => n === 0, 20_000, 100);
    });
  });
});

// The embedded mode's own database adapter (one PGlite connection, its values) under the list and
// delete SQL: an in-process system on the embedded database, which lives in the test's process, so
// the seeds go in while it runs.
describe("replays with seeded replays (embedded database)", () => {
  const system = useInProcessSystem({}, { embedded: true });
  let db: Db;
  let t: Awaited<ReturnType<typeof provisionTenant>>;
  const ids: Record<string, string> = {};
  const signed = (method: string, path: string) => sendSigned(system().baseUrl, t.signer, method, path);

  beforeAll(async () => {
    db = system().db("replays");
    t = await provisionTenant(system());
    ids.serverA = randomUUID();
    ids.old = await seed(db, t.tenantId, { serverId: ids.serverA, startedAt: "2126-04-01T00:00:00.000Z" });
    ids.mid = await seed(db, t.tenantId, { integration: "gmod", startedAt: "2126-04-02T00:00:00.000Z" });
    ids.tieA = await seed(db, t.tenantId, { serverId: ids.serverA, startedAt: "2126-04-03T00:00:00.000Z" });
    ids.tieB = await seed(db, t.tenantId, { startedAt: "2126-04-03T00:00:00.000Z" });
    ids.recording = await seed(db, t.tenantId, { status: "recording", startedAt: "2126-04-04T00:00:00.000001Z" });
    await setStorage(db, t.tenantId, 4_000);
  });

  it("lists newest first, then by id descending, across pages, with every field (null when unset)", async () => {
    const [tieHigh, tieLow] = [ids.tieA, ids.tieB].sort().reverse();
    const expected = [ids.recording, tieHigh, tieLow, ids.mid, ids.old];
    const seen: string[] = [];
    let token = "";
    for (let page = 0; page < 3; page++) {
      const res = await signed("GET", `/v1/replays?page_size=2${token ? `&page_token=${token}` : ""}`);
      expect(res.status, res.text).toBe(200);
      seen.push(...res.body.results.map((r: { id: string }) => r.id));
      token = res.body.next_page_token;
      expect(token === "", `page ${page}`).toBe(page === 2);
    }
    expect(seen).toEqual(expected);
    const recording = await signed("GET", `/v1/replays/${ids.recording}`);
    expect(recording.body).toStrictEqual(
      recordingMetadata(ids.recording, expect.stringMatching(/^[0-9a-f-]{36}$/), "2126-04-04T00:00:00.000Z"),
    );
    expect((await signed("GET", `/v1/replays/${ids.old}`)).body).toMatchObject({
      ended_at: "2126-04-01T00:00:05.000Z",
      duration_ms: 5_000,
      size_bytes: 1_000,
      format_version: 1,
      status: "ready",
    });
  });

  it("filters by server_id and integration", async () => {
    const list = async (query: string) =>
      (await signed("GET", `/v1/replays${query}`)).body.results.map((r: { id: string }) => r.id);
    expect(await list(`?server_id=${ids.serverA}`)).toEqual([ids.tieA, ids.old]);
    expect(await list("?integration=gmod")).toEqual([ids.mid]);
    expect(await list(`?server_id=${ids.serverA}&integration=gmod`)).toEqual([]);
  });

  it("deletes: 204, storage freed, then 404; the events are in the outbox and the archive's queue entry drained", async () => {
    const res = await signed("DELETE", `/v1/replays/${ids.mid}`);
    expect(res.status, res.text).toBe(204);
    expectProblem(await signed("DELETE", `/v1/replays/${ids.mid}`), 404, "REPLAY_NOT_FOUND");
    expectProblem(await signed("GET", `/v1/replays/${ids.mid}`), 404, "REPLAY_NOT_FOUND");
    expect((await system().admin.getTenant({ tenantId: t.tenantId })).tenant?.storageUsedBytes).toBe(3_000n);
    const recording = await signed("DELETE", `/v1/replays/${ids.recording}`);
    expect(recording.status, recording.text).toBe(204);
    expect((await system().admin.getTenant({ tenantId: t.tenantId })).tenant?.storageUsedBytes).toBe(3_000n);
    const { rows } = await db.query<{ subject: string; payload: Uint8Array }>(
      "SELECT subject, payload FROM replays.outbox WHERE subject IN ('replays.replay.deleted', 'replays.asset.deleted') ORDER BY id",
    );
    const deleted = rows
      .filter((r) => r.subject === "replays.replay.deleted")
      .map((r) => decodeEvent("replays.replay.deleted", r.payload).replayId);
    expect(deleted).toEqual([ids.mid, ids.recording]);
    expect(rows.filter((r) => r.subject === "replays.asset.deleted")).toHaveLength(2);
    // The archive's queue entry is drained by the worker once the blob store confirmed.
    const archiveKey = `tenant/${t.tenantId}/replay/${ids.mid}.rpl`;
    await pollUntil(
      async () =>
        (await db.query("SELECT 1 FROM replays.blob_deletion WHERE archive_key = $1", [archiveKey])).rows.length,
      (n) => n === 0,
      20_000,
      200,
    );
  });
});
