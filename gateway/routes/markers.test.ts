import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { expectLikeUnknown, expectProblem } from "../../test/expect.js";
import { send } from "../../test/http.js";
import { useInProcessSystem } from "../../test/in-process.js";
import { recordingOnNewServer } from "../../test/recorder.js";
import { type RouteTenant, routeTenant } from "../../test/route-tenant.js";

// The timeline marker routes (spec "Timeline markers", decisions.md §1 and §3) on an in-process
// system: every refusal's status and code, in the documented validation order.

const system = useInProcessSystem();
let t: RouteTenant;
let other: RouteTenant;
/** A recording of `t`'s, with one marker. */
let replayId: string;
let markerId: string;
/** A pending setup of `t`'s: known, recording nothing. */
let pendingServerId: string;

beforeAll(async () => {
  [t, other] = [await routeTenant(system()), await routeTenant(system())];
  ({ replayId } = await recordingOnNewServer(system(), t.bearer(), "recording"));
  const marker = await t.api("POST", "/v1/api/timeline-events", { body: { replayId, tick: 1, label: "kept" } });
  expect(marker.status, marker.text).toBe(201);
  markerId = marker.body.id;
  const pending = await t.api("POST", "/v1/api/servers", { body: { name: "pending" } });
  expect(pending.status, pending.text).toBe(201);
  pendingServerId = pending.body.serverId;
});

const create = (body: unknown, headers: Record<string, string> = {}) =>
  t.api("POST", "/v1/api/timeline-events", { body, headers });

describe("POST /v1/api/timeline-events", () => {
  const r = randomUUID();
  // decisions.md §1: target, then tick, label, category, colour, icon, actor; the first failure answers.
  it.each<[string, string, unknown]>([
    [
      "both targets, before every other field",
      "INVALID_TARGET",
      { replayId: r, serverId: randomUUID(), tick: -1, label: "" },
    ],
    ["no target", "INVALID_TARGET", { tick: 1, label: "x" }],
    ["both targets null", "INVALID_TARGET", { replayId: null, serverId: null, tick: 1, label: "x" }],
    ["a malformed replayId beside a serverId", "INVALID_TARGET", { replayId: 5, serverId: r, tick: 1, label: "x" }],
    ["an empty replayId, before the tick", "INVALID_REPLAY_ID", { replayId: "", tick: -1 }],
    ["a replayId that is a number", "INVALID_REPLAY_ID", { replayId: 7, tick: -1 }],
    ["a replayId in braces", "INVALID_REPLAY_ID", { replayId: `{${r}}`, tick: -1 }],
    ["an empty serverId, before the tick", "INVALID_SERVER_ID", { serverId: "", tick: -1 }],
    ["a serverId that is no UUID", "INVALID_SERVER_ID", { serverId: "nope", tick: -1 }],
    ["no tick, before the label", "INVALID_TICK", { replayId: r, label: "" }],
    ["a tick that is a string", "INVALID_TICK", { replayId: r, tick: "5", label: "x" }],
    ["a fractional tick", "INVALID_TICK", { replayId: r, tick: 1.5, label: "x" }],
    ["a tick of 2^53", "INVALID_TICK", { replayId: r, tick: 2 ** 53, label: "x" }],
    ["a tick of 1e300", "INVALID_TICK", { replayId: r, tick: 1e300, label: "x" }],
    ["a negative tick", "INVALID_TICK", { replayId: r, tick: -1, label: "x" }],
    ["a null tick", "INVALID_TICK", { replayId: r, tick: null, label: "x" }],
    ["no label, before the category", "INVALID_LABEL", { replayId: r, tick: 1, category: "c".repeat(61) }],
    ["a blank label", "INVALID_LABEL", { replayId: r, tick: 1, label: "   " }],
    ["a label of 121 characters", "INVALID_LABEL", { replayId: r, tick: 1, label: "L".repeat(121) }],
    ["a label of 121 code points", "INVALID_LABEL", { replayId: r, tick: 1, label: "😀".repeat(121) }],
    ["a label with a control character", "INVALID_LABEL", { replayId: r, tick: 1, label: "bell\u0007" }],
    ["a label with U+0000", "INVALID_LABEL", { replayId: r, tick: 1, label: "nul\u0000" }],
    ["a label that is an array", "INVALID_LABEL", { replayId: r, tick: 1, label: ["x"] }],
    [
      "a category of 61 characters, before the colour",
      "INVALID_CATEGORY",
      { replayId: r, tick: 1, label: "x", category: "c".repeat(61), colour: "red" },
    ],
    ["a category with a tab", "INVALID_CATEGORY", { replayId: r, tick: 1, label: "x", category: "tab\tinside" }],
    ["a category that is a number", "INVALID_CATEGORY", { replayId: r, tick: 1, label: "x", category: 1 }],
    [
      "a colour of #rgb, before the icon",
      "INVALID_COLOUR",
      { replayId: r, tick: 1, label: "x", colour: "#abc", icon: "nope" },
    ],
    ["a colour with a space", "INVALID_COLOUR", { replayId: r, tick: 1, label: "x", colour: " #abcdef" }],
    ["an empty colour", "INVALID_COLOUR", { replayId: r, tick: 1, label: "x", colour: "" }],
    [
      "an icon in another case, before the actor",
      "INVALID_ICON",
      { replayId: r, tick: 1, label: "x", icon: "Star", actor: "a".repeat(81) },
    ],
    ["an icon with a space", "INVALID_ICON", { replayId: r, tick: 1, label: "x", icon: " star" }],
    [
      "an icon that is a URL",
      "INVALID_ICON",
      { replayId: r, tick: 1, label: "x", icon: "https://cdn.example.com/i.png" },
    ],
    ["an actor of 81 characters", "INVALID_ACTOR", { replayId: r, tick: 1, label: "x", actor: "a".repeat(81) }],
    ["an actor with a line break", "INVALID_ACTOR", { replayId: r, tick: 1, label: "x", actor: "line\nbreak" }],
    ["an actor that is a boolean", "INVALID_ACTOR", { replayId: r, tick: 1, label: "x", actor: false }],
  ])("refuses %s: 400 %s", async (_why, code, body) => {
    expectProblem(await create(body), 400, code, JSON.stringify(body));
  });

  it.each(["", "{", "[]", "null", '"x"', "5"])("refuses the body %j: 400 INVALID_BODY", async (raw) => {
    expectProblem(await t.api("POST", "/v1/api/timeline-events", { rawBody: raw }), 400, "INVALID_BODY");
  });

  it.each([
    ["empty", ""],
    ["with a space", "a b"],
    ["not ASCII", "é"],
    ["of 256 characters", "x".repeat(256)],
  ])("refuses an Idempotency-Key %s: 400 INVALID_IDEMPOTENCY_KEY", async (_why, key) => {
    const res = await create({ replayId, tick: 1, label: "x" }, { "idempotency-key": key });
    expectProblem(res, 400, "INVALID_IDEMPOTENCY_KEY");
  });

  it("answers a malformed body before a malformed Idempotency-Key", async () => {
    const res = await t.api("POST", "/v1/api/timeline-events", { rawBody: "{", headers: { "idempotency-key": "a b" } });
    expectProblem(res, 400, "INVALID_BODY");
  });

  it("answers an unknown replayId or serverId with 404 REPLAY_NOT_FOUND, after validation", async () => {
    expectProblem(await create({ replayId: r, tick: 1, label: "x" }), 404, "REPLAY_NOT_FOUND");
    expectProblem(await create({ serverId: r, tick: 1, label: "x" }), 404, "REPLAY_NOT_FOUND");
    expectProblem(await create({ replayId: r, tick: -1, label: "x" }), 400, "INVALID_TICK");
  });

  it("answers a server with nothing recording (a pending setup) with 404 NO_ACTIVE_RECORDING", async () => {
    expectProblem(await create({ serverId: pendingServerId, tick: 1, label: "x" }), 404, "NO_ACTIVE_RECORDING");
  });

  it("answers another tenant's replay and server as unknown ones", async () => {
    const unknown = randomUUID();
    const body = (id: string) => ({ replayId: id, tick: 1, label: "x" });
    const post = (id: string) => other.api("POST", "/v1/api/timeline-events", { body: body(id) });
    expectLikeUnknown(await post(replayId), replayId, await post(unknown), unknown, 404, "REPLAY_NOT_FOUND");
    const byServer = (id: string) =>
      other.api("POST", "/v1/api/timeline-events", { body: { serverId: id, tick: 1, label: "x" } });
    const [theirs, none] = [await byServer(pendingServerId), await byServer(unknown)];
    expectLikeUnknown(theirs, pendingServerId, none, unknown, 404, "REPLAY_NOT_FOUND");
  });

  it("refuses a request without authentication (401), then a key without replays:write (403), before the body", async () => {
    const none = await send(system().baseUrl, "POST", "/v1/api/timeline-events", { rawBody: "{" });
    expectProblem(none, 401, "UNAUTHENTICATED");
    for (const key of [await t.keyWithout("replays:write"), (await t.mintKey(["replays:read"])).key]) {
      for (const rawBody of ["{", JSON.stringify({ replayId: randomUUID(), tick: 1, label: "scoped" })]) {
        const res = await t.api("POST", "/v1/api/timeline-events", { key, rawBody });
        expect(expectProblem(res, 403, "INSUFFICIENT_SCOPE", rawBody).detail).toContain("replays:write");
      }
    }
  });
});

describe("DELETE /v1/api/timeline-events/{id}", () => {
  it.each(["nope", `${randomUUID()}0`, "%20"])("refuses the id %j: 400 INVALID_MARKER_ID", async (id) => {
    expectProblem(await t.api("DELETE", `/v1/api/timeline-events/${id}`), 400, "INVALID_MARKER_ID");
  });

  it("answers an unknown marker, and another tenant's as an unknown one, with 404 MARKER_NOT_FOUND", async () => {
    const unknown = randomUUID();
    expectProblem(await t.api("DELETE", `/v1/api/timeline-events/${unknown}`), 404, "MARKER_NOT_FOUND");
    const remove = (id: string) => other.api("DELETE", `/v1/api/timeline-events/${id}`);
    expectLikeUnknown(await remove(markerId), markerId, await remove(unknown), unknown, 404, "MARKER_NOT_FOUND");
    expect((await t.api("GET", `/v1/api/replays/${replayId}/timeline-events`)).body.timelineEvents).toHaveLength(1);
  });

  it("refuses a key without replays:write: 403 INSUFFICIENT_SCOPE", async () => {
    for (const key of [await t.keyWithout("replays:write"), (await t.mintKey(["replays:read"])).key]) {
      const res = await t.api("DELETE", `/v1/api/timeline-events/${randomUUID()}`, { key });
      expect(expectProblem(res, 403, "INSUFFICIENT_SCOPE").detail).toContain("replays:write");
    }
  });
});

describe("GET /v1/api/replays/{id}/timeline-events", () => {
  it.each(["nope", `${randomUUID()}0`, "%20"])("refuses the id %j: 400 INVALID_REPLAY_ID", async (id) => {
    expectProblem(await t.api("GET", `/v1/api/replays/${id}/timeline-events`), 400, "INVALID_REPLAY_ID");
  });

  it("answers an unknown replay, and another tenant's as an unknown one, with 404 REPLAY_NOT_FOUND", async () => {
    const unknown = randomUUID();
    expectProblem(await t.api("GET", `/v1/api/replays/${unknown}/timeline-events`), 404, "REPLAY_NOT_FOUND");
    const list = (id: string) => other.api("GET", `/v1/api/replays/${id}/timeline-events`);
    expectLikeUnknown(await list(replayId), replayId, await list(unknown), unknown, 404, "REPLAY_NOT_FOUND");
  });

  it("refuses a key without replays:read: 403 INSUFFICIENT_SCOPE", async () => {
    for (const key of [await t.keyWithout("replays:read"), (await t.mintKey(["replays:write"])).key]) {
      const res = await t.api("GET", `/v1/api/replays/${randomUUID()}/timeline-events`, { key });
      expect(expectProblem(res, 403, "INSUFFICIENT_SCOPE").detail).toContain("replays:read");
    }
  });
});
