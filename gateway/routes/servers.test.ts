import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import { trustedHeaders } from "../../lib/rpc/context.js";
import { expectLikeUnknown, expectProblem } from "../../test/expect.js";
import { ALL_SCOPES } from "../../test/http.js";
import { useInProcessSystem } from "../../test/in-process.js";
import { grpcCheckIn } from "../../test/recorder.js";
import { type RouteTenant, routeTenant } from "../../test/route-tenant.js";

// The servers management routes (spec "Servers", decisions.md §2 "Management keys" and §4) on an
// in-process system: every refusal's status and code, in the documented order.

const system = useInProcessSystem();
let t: RouteTenant;
let other: RouteTenant;
/** `t`'s connected server and pending setup. */
let serverId: string;
let pendingId: string;

async function createServer(tenant: RouteTenant, body: Record<string, unknown>): Promise<string> {
  const res = await tenant.api("POST", "/v1/api/servers", { body });
  expect(res.status, res.text).toBe(201);
  return res.body.serverId;
}

/** A category of the tenant's, made as replayctl makes one: on the servers service, through the internal port. */
async function createCategory(tenantId: string): Promise<string> {
  const servers = createClient(ServersService, createGrpcTransport({ baseUrl: system().internalUrl }));
  const res = await servers.createCategory(
    { name: `c-${randomUUID().slice(0, 6)}` },
    { headers: trustedHeaders({ tenantId }) },
  );
  return res.category?.categoryId as string;
}

beforeAll(async () => {
  [t, other] = [await routeTenant(system()), await routeTenant(system())];
  serverId = await createServer(t, { name: "connected" });
  await grpcCheckIn(system().internalUrl, serverId, { pluginVersion: "1.0.0" });
  pendingId = await createServer(t, { name: "pending" });
});

/** `t`'s servers and pending setups, to show a refused write changed nothing. */
async function records() {
  const [servers, pending] = [await t.api("GET", "/v1/api/servers"), await t.api("GET", "/v1/api/servers/pending")];
  return { servers: servers.body, pending: pending.body };
}

describe("POST /v1/api/servers", () => {
  // decisions.md §4: name, then categoryId, then sourceServerId.
  it.each<[string, string, unknown]>([
    ["a name that is a number", "INVALID_NAME", { name: 42 }],
    ["no name", "INVALID_NAME", {}],
    ["an empty name, before a bad categoryId", "INVALID_NAME", { name: "", categoryId: 7 }],
    ["a blank name", "INVALID_NAME", { name: " \u3000 " }],
    ["a name of 65 characters", "INVALID_NAME", { name: "a".repeat(65) }],
    ["a name of 65 code points", "INVALID_NAME", { name: "😀".repeat(65) }],
    ["a name with a control character", "INVALID_NAME", { name: "bell\u0007" }],
    ["a categoryId that is a number", "INVALID_CATEGORY_ID", { name: "ok", categoryId: 7 }],
    ["an empty categoryId", "INVALID_CATEGORY_ID", { name: "ok", categoryId: "" }],
    [
      "a categoryId that is no UUID, before a bad sourceServerId",
      "INVALID_CATEGORY_ID",
      { name: "ok", categoryId: "x", sourceServerId: "y" },
    ],
    ["a sourceServerId that is no UUID", "INVALID_SERVER_ID", { name: "ok", sourceServerId: "nope" }],
    ["an empty sourceServerId", "INVALID_SERVER_ID", { name: "ok", sourceServerId: "" }],
  ])("refuses %s: 400 %s, storing nothing", async (_why, code, body) => {
    const before = await records();
    expectProblem(await t.api("POST", "/v1/api/servers", { body }), 400, code, JSON.stringify(body));
    expect(await records()).toEqual(before);
  });

  it.each([
    ["an array", '["name"]'],
    ["malformed JSON", "{"],
  ])("refuses a body that is %s: 400 INVALID_BODY", async (_why, raw) => {
    expectProblem(await t.api("POST", "/v1/api/servers", { rawBody: raw }), 400, "INVALID_BODY");
  });

  it("accepts a name of 64 code points and a null categoryId", async () => {
    const res = await t.api("POST", "/v1/api/servers", { body: { name: "😀".repeat(64), categoryId: null } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.name).toBe("😀".repeat(64));
    expect((await t.api("DELETE", `/v1/api/servers/pending/${res.body.serverId}`)).status).toBe(204);
  });

  it("answers an unknown category with 404 CATEGORY_NOT_FOUND and an unknown source with 404 SERVER_NOT_FOUND", async () => {
    const before = await records();
    const unknown = randomUUID();
    expectProblem(
      await t.api("POST", "/v1/api/servers", { body: { name: "x", categoryId: unknown } }),
      404,
      "CATEGORY_NOT_FOUND",
    );
    for (const sourceServerId of [unknown, pendingId]) {
      const res = await t.api("POST", "/v1/api/servers", { body: { name: "x", sourceServerId } });
      expectProblem(res, 404, "SERVER_NOT_FOUND", sourceServerId);
    }
    expect(await records()).toEqual(before);
  });

  it("answers another tenant's source server and category as unknown ones", async () => {
    const unknown = randomUUID();
    const copy = (sourceServerId: string) =>
      other.api("POST", "/v1/api/servers", { body: { name: "x", sourceServerId } });
    expectLikeUnknown(await copy(serverId), serverId, await copy(unknown), unknown, 404, "SERVER_NOT_FOUND");
    const category = await createCategory(t.tenantId);
    const into = (categoryId: string) => other.api("POST", "/v1/api/servers", { body: { name: "x", categoryId } });
    expectLikeUnknown(await into(category), category, await into(unknown), unknown, 404, "CATEGORY_NOT_FOUND");
  });
});

describe("PATCH /v1/api/servers/{id}", () => {
  it.each<[string, number, string, string, unknown]>([
    ["a malformed id, before a bad name", 400, "INVALID_SERVER_ID", "not-a-uuid", { name: "" }],
    ["a name that is a number", 400, "INVALID_NAME", "{id}", { name: 42 }],
    ["an empty name", 400, "INVALID_NAME", "{id}", { name: "" }],
    ["a name of 65 characters", 400, "INVALID_NAME", "{id}", { name: "a".repeat(65) }],
    ["no name", 400, "INVALID_NAME", "{id}", {}],
    ["a pending setup's id", 404, "SERVER_NOT_FOUND", "{pending}", { name: "x" }],
    ["an unknown id", 404, "SERVER_NOT_FOUND", randomUUID(), { name: "x" }],
  ])("refuses %s: %i %s", async (_why, status, code, id, body) => {
    const path = `/v1/api/servers/${id.replace("{id}", serverId).replace("{pending}", pendingId)}`;
    expectProblem(await t.api("PATCH", path, { body }), status, code);
  });

  it("refuses a body that is not a JSON object: 400 INVALID_BODY", async () => {
    expectProblem(await t.api("PATCH", `/v1/api/servers/${serverId}`, { rawBody: "[]" }), 400, "INVALID_BODY");
  });
});

// The three removals: each addresses one kind of record, and answers an id of the other kind as unknown.
describe.each([
  ["/v1/api/servers/", "{pending}"],
  ["/v1/api/servers/permanent/", "{pending}"],
  ["/v1/api/servers/pending/", "{id}"],
])("DELETE %s{id}", (prefix, otherKind) => {
  it.each(["not-a-uuid", `${randomUUID()}0`, "%20"])("refuses the id %j: 400 INVALID_SERVER_ID", async (id) => {
    expectProblem(await t.api("DELETE", `${prefix}${id}`), 400, "INVALID_SERVER_ID");
  });

  it("answers an unknown id, and one of the other kind of record, with 404 SERVER_NOT_FOUND", async () => {
    const before = await records();
    expectProblem(await t.api("DELETE", `${prefix}${randomUUID()}`), 404, "SERVER_NOT_FOUND");
    const id = otherKind === "{id}" ? serverId : pendingId;
    expectProblem(await t.api("DELETE", `${prefix}${id}`), 404, "SERVER_NOT_FOUND");
    expect(await records()).toEqual(before);
  });
});

describe("another tenant's server", () => {
  it.each<[string, string, "server" | "pending", unknown]>([
    ["PATCH", "/v1/api/servers/", "server", { name: "taken over" }],
    ["DELETE", "/v1/api/servers/", "server", undefined],
    ["DELETE", "/v1/api/servers/permanent/", "server", undefined],
    ["DELETE", "/v1/api/servers/pending/", "pending", undefined],
  ])("%s %s{id} answers it as an unknown one, changing nothing", async (method, prefix, kind, body) => {
    const before = await records();
    const theirs = kind === "server" ? serverId : pendingId;
    const unknown = randomUUID();
    const [cross, none] = [
      await other.api(method, `${prefix}${theirs}`, { body }),
      await other.api(method, `${prefix}${unknown}`, { body }),
    ];
    expectLikeUnknown(cross, theirs, none, unknown, 404, "SERVER_NOT_FOUND");
    expect(await records()).toEqual(before);
  });

  it("is in neither list of the other tenant", async () => {
    expect((await other.api("GET", "/v1/api/servers")).body).toEqual({ servers: [] });
    expect((await other.api("GET", "/v1/api/servers/pending")).body).toEqual({ pending: [] });
  });
});

describe("the order of a servers write's refusals (decisions.md §4)", () => {
  // 400, then the member's binding and rights (403), then existence (404), then access (403), then the plan (409).
  let limited: RouteTenant;
  let category: string;
  let viewer: string;
  let member: string;
  let unbound: string;
  beforeAll(async () => {
    limited = await routeTenant(system(), { serverLimit: 1n });
    category = await createCategory(limited.tenantId);
    await createServer(limited, { name: "fills the plan", categoryId: category });
    const keyOf = async (role: MemberRole) => {
      const { memberId } = await system().admin.addMember({ tenantId: limited.tenantId, role });
      return (await limited.mintKey(ALL_SCOPES, memberId)).key;
    };
    [viewer, member] = [await keyOf(MemberRole.VIEWER), await keyOf(MemberRole.MEMBER)];
    unbound = (await limited.mintKey(ALL_SCOPES, null)).key;
  });

  it.each<[string, number, string, string, string, string, unknown]>([
    [
      "a viewer's malformed id",
      400,
      "INVALID_SERVER_ID",
      "viewer",
      "PATCH",
      "/v1/api/servers/not-a-uuid",
      { name: "x" },
    ],
    ["a viewer's bad name", 400, "INVALID_NAME", "viewer", "POST", "/v1/api/servers", { name: "" }],
    [
      "a viewer's write to an unknown server",
      403,
      "PERMISSION_DENIED",
      "viewer",
      "PATCH",
      "/v1/api/servers/{unknown}",
      { name: "x" },
    ],
    [
      "an unbound key's write to an unknown server",
      403,
      "ACTOR_BINDING_REQUIRED",
      "unbound",
      "PATCH",
      "/v1/api/servers/{unknown}",
      { name: "x" },
    ],
    ["an unbound key's create", 403, "ACTOR_BINDING_REQUIRED", "unbound", "POST", "/v1/api/servers", { name: "x" }],
    [
      "a member's write to an unknown server",
      404,
      "SERVER_NOT_FOUND",
      "member",
      "PATCH",
      "/v1/api/servers/{unknown}",
      { name: "x" },
    ],
    [
      "a member's create in an unknown category",
      404,
      "CATEGORY_NOT_FOUND",
      "member",
      "POST",
      "/v1/api/servers",
      { name: "x", categoryId: "{unknown}" },
    ],
    [
      "a member's create in a category not granted",
      403,
      "TARGET_ACCESS_DENIED",
      "member",
      "POST",
      "/v1/api/servers",
      { name: "x", categoryId: "{category}" },
    ],
    [
      "the owner's create over the plan",
      409,
      "SERVER_LIMIT_REACHED",
      "owner",
      "POST",
      "/v1/api/servers",
      { name: "x", categoryId: "{category}" },
    ],
  ])("%s: %i %s", async (_why, status, code, who, method, path, body) => {
    const fill = (text: string) => text.replace("{unknown}", randomUUID()).replace("{category}", category);
    const key = { viewer, member, unbound, owner: limited.key }[who];
    const res = await limited.api(method, fill(path), { key, body: JSON.parse(fill(JSON.stringify(body))) });
    expectProblem(res, status, code);
  });

  it("lets a key minted before member binding read", async () => {
    const res = await limited.api("GET", "/v1/api/servers", { key: unbound });
    expect(res.status, res.text).toBe(200);
  });
});

describe("scopes", () => {
  const id = randomUUID();
  it.each<[string, string, string, string | undefined]>([
    ["servers:read", "GET", "/v1/api/servers", undefined],
    ["servers:read", "GET", "/v1/api/servers/pending", undefined],
    ["servers:write", "POST", "/v1/api/servers", JSON.stringify({ name: "scoped" })],
    ["servers:write", "POST", "/v1/api/servers", "{not json"],
    ["servers:write", "PATCH", `/v1/api/servers/${id}`, JSON.stringify({ name: "renamed" })],
    ["servers:write", "DELETE", `/v1/api/servers/${id}`, undefined],
    ["servers:write", "DELETE", `/v1/api/servers/permanent/${id}`, undefined],
    ["servers:write", "DELETE", `/v1/api/servers/pending/${id}`, undefined],
  ])(
    "a key without %s is refused on %s %s (body %s): 403 INSUFFICIENT_SCOPE naming it",
    async (scope, method, path, rawBody) => {
      const res = await t.api(method, path, { key: await t.keyWithout(scope), rawBody });
      expect(expectProblem(res, 403, "INSUFFICIENT_SCOPE").detail).toContain(scope);
    },
  );
});
