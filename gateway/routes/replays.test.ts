import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { expectLikeUnknown, expectProblem } from "../../test/expect.js";
import type { Res } from "../../test/http.js";
import { useInProcessSystem } from "../../test/in-process.js";
import { recordingOnNewServer } from "../../test/recorder.js";
import { type RouteTenant, routeTenant } from "../../test/route-tenant.js";

// The replays routes (spec "Replays", decisions.md §5), signed and by API key, on an in-process
// system: every refusal's status and code.

const system = useInProcessSystem();
let t: RouteTenant;
let other: RouteTenant;
/** `t`'s two recordings, newest first. */
let replays: string[];

beforeAll(async () => {
  [t, other] = [await routeTenant(system()), await routeTenant(system())];
  const older = await recordingOnNewServer(system(), t.bearer(), "first");
  const newer = await recordingOnNewServer(system(), t.bearer(), "second");
  replays = [newer.replayId, older.replayId];
});

type Get = (tenant: RouteTenant, path: string) => Promise<Res>;
const signed: Get = (tenant, path) => tenant.signed("GET", path);
const byKey: Get = (tenant, path) => tenant.api("GET", path);

describe.each<[string, string, Get]>([
  ["GET /v1/replays", "/v1/replays", signed],
  ["GET /v1/api/replays", "/v1/api/replays", byKey],
])("%s", (_route, path, get) => {
  // decisions.md §5: 1 to 3 ASCII digits with a value from 1 to 100, given once.
  it.each(["0", "101", "1000", "-1", "+5", "%205", "5%20", "1e2", "5.0", "", "abc", "5&page_size=5"])(
    "refuses page_size=%s: 400 INVALID_PAGE_SIZE",
    async (size) => {
      expectProblem(await get(t, `${path}?page_size=${size}`), 400, "INVALID_PAGE_SIZE");
    },
  );

  it.each(["x", "", `${randomUUID()}-`, "%00"])("refuses server_id=%s: 400 INVALID_SERVER_ID", async (id) => {
    expectProblem(await get(t, `${path}?server_id=${id}`), 400, "INVALID_SERVER_ID");
  });

  it.each(["AQ", "abc"])("refuses page_token=%s: 400 INVALID_PAGE_TOKEN", async (token) => {
    expectProblem(await get(t, `${path}?page_token=${token}`), 400, "INVALID_PAGE_TOKEN");
  });

  it("refuses a page token of another tenant, of the other route, or tampered: 400 INVALID_PAGE_TOKEN", async () => {
    const first = await get(t, `${path}?page_size=1`);
    expect(first.body.results.map((r: { id: string }) => r.id)).toEqual(replays.slice(0, 1));
    const token: string = first.body.next_page_token;
    expect(token).not.toBe("");
    const otherRoute = get === signed ? byKey : signed;
    const otherPath = get === signed ? "/v1/api/replays" : "/v1/replays";
    expectProblem(await get(other, `${path}?page_token=${token}`), 400, "INVALID_PAGE_TOKEN");
    expectProblem(await otherRoute(t, `${otherPath}?page_token=${token}`), 400, "INVALID_PAGE_TOKEN");
    expectProblem(await get(t, `${path}?page_token=${token.slice(0, -2)}AA`), 400, "INVALID_PAGE_TOKEN");
    const second = await get(t, `${path}?page_size=1&page_token=${token}`);
    expect(second.body.results.map((r: { id: string }) => r.id)).toEqual(replays.slice(1));
  });

  it("lists none of another tenant's replays", async () => {
    expect((await get(other, path)).body).toEqual({ results: [], next_page_token: "", page_size: 20 });
    expect((await get(t, path)).body.results.map((r: { id: string }) => r.id)).toEqual(replays);
  });
});

const malformedIds = [
  "nope",
  "6ba7b810-9dad-11d1-80b4-00c04fd430c8", // a version 1 UUID: the replay routes take version 4 only
  `${randomUUID()}0`,
  randomUUID().replace(/-/g, ""),
  `${randomUUID()}%00`,
  "%20",
];

describe.each<[string, (tenant: RouteTenant, id: string) => Promise<Res>]>([
  ["GET /v1/replays/{id}", (tenant, id) => tenant.signed("GET", `/v1/replays/${id}`)],
  ["DELETE /v1/replays/{id}", (tenant, id) => tenant.signed("DELETE", `/v1/replays/${id}`)],
  ["GET /v1/api/replays/{id}", (tenant, id) => tenant.api("GET", `/v1/api/replays/${id}`)],
])("%s", (_route, call) => {
  it.each(malformedIds)("refuses the id %s: 400 INVALID_REPLAY_ID", async (id) => {
    expectProblem(await call(t, id), 400, "INVALID_REPLAY_ID");
  });

  it("answers an unknown replay, in either case, with 404 REPLAY_NOT_FOUND", async () => {
    const unknown = randomUUID();
    expectProblem(await call(t, unknown), 404, "REPLAY_NOT_FOUND");
    expectProblem(await call(t, unknown.toUpperCase()), 404, "REPLAY_NOT_FOUND");
  });

  it("answers another tenant's replay as an unknown one, changing nothing", async () => {
    const [theirs, unknown] = [replays[0] as string, randomUUID()];
    expectLikeUnknown(await call(other, theirs), theirs, await call(other, unknown), unknown, 404, "REPLAY_NOT_FOUND");
    const still = await t.signed("GET", `/v1/replays/${theirs}`);
    expect(still.status, still.text).toBe(200);
  });
});

describe("scopes", () => {
  it.each(["/v1/api/replays", `/v1/api/replays/${randomUUID()}`])(
    "a key without replays:read is refused on GET %s: 403 INSUFFICIENT_SCOPE naming it",
    async (path) => {
      const res = await t.api("GET", path, { key: await t.keyWithout("replays:read") });
      expect(expectProblem(res, 403, "INSUFFICIENT_SCOPE").detail).toContain("replays:read");
    },
  );
});
