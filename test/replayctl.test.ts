import { createHash, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { ALL_SCOPES, provisionTenant } from "./http.js";
import { runReplayctl, spawnReplayctl } from "./replayctl.js";
import { oneSharedSystem } from "./shared-system.js";

// replayctl's list commands end to end against one shared system's internal port (the admin API
// is the same code in both modes), the CLI run in this process but for one test of the compiled
// binary: what they show, what they never show, and tenant isolation.

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

describe.each(oneSharedSystem())("replayctl list commands ($mode mode)", (sys) => {
  async function replayctl(...args: string[]) {
    const run = await runReplayctl(sys.internalUrl, args);
    expect({ code: run.code, stderr: run.stderr }, args.join(" ")).toEqual({ code: 0, stderr: "" });
    return run.out;
  }

  /** Every row of a list command, following nextPageToken; also checks the pages' order. */
  async function listAll(field: string, args: string[], pageSize = 100): Promise<any[]> {
    const rows: any[] = [];
    let token = "";
    for (let pages = 0; pages < 1000; pages++) {
      const out = await replayctl(...args, "--page-size", String(pageSize), ...(token ? ["--page-token", token] : []));
      expect(Object.keys(out).sort()).toEqual([field, "nextPageToken"].sort());
      rows.push(...out[field]);
      token = out.nextPageToken;
      if (token === "") break;
    }
    const created = rows.map((row) => row.createdAt);
    expect(created, "oldest first").toEqual([...created].sort());
    return rows;
  }

  it("runs as the compiled binary (as npx runs it): one JSON line and exit 0, or the problem on stderr and exit 1", async () => {
    const created = await spawnReplayctl(sys.internalUrl, ["tenant", "create", "--name", "spawned"]);
    expect({ code: created.code, stderr: created.stderr }).toEqual({ code: 0, stderr: "" });
    expect(created.stdout).toMatch(/^\{.*\}\n$/);
    const refused = await spawnReplayctl(sys.internalUrl, ["tenant", "show", "--tenant", "not-a-uuid"]);
    expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 1, stdout: "" });
    expect(refused.problem).toMatchObject({ status: 400, code: "INVALID_ARGUMENT" });
  });

  it("tenant list shows a new tenant with its plan, oldest first, each tenant once across pages", async () => {
    const name = `list-${randomUUID().slice(0, 8)}`;
    const { tenantId } = await replayctl(
      "tenant",
      "create",
      "--name",
      name,
      "--server-limit",
      "7",
      "--storage-quota-bytes",
      "12345",
      "--rate-limit-rps",
      "9",
      "--rate-limit-burst",
      "11",
    );
    const tenants = await listAll("tenants", ["tenant", "list"]);
    expect(new Set(tenants.map((t) => t.tenantId)).size).toBe(tenants.length);
    const mine = tenants.find((t) => t.tenantId === tenantId);
    expect(mine).toEqual({
      tenantId,
      name,
      serverLimit: 7,
      storageQuotaBytes: 12345,
      rateLimitRps: 9,
      rateLimitBurst: 11,
      retentionDays: 90,
      hotDays: 30,
      createdAt: expect.stringMatching(ISO),
    });
    // Pages of one give the same tenants in the same order as the pages of a hundred.
    const head = tenants.slice(0, 3).map((t) => t.tenantId);
    let token = "";
    for (const expected of head) {
      const out = await replayctl("tenant", "list", "--page-size", "1", ...(token ? ["--page-token", token] : []));
      expect(out.tenants.map((t: { tenantId: string }) => t.tenantId)).toEqual([expected]);
      token = out.nextPageToken;
    }
  });

  it("key list shows the tenant's keys (scopes, member, revocation) and never a key or its hash", async () => {
    const t = await provisionTenant(sys);
    const bound = await replayctl(
      "key",
      "create",
      "--tenant",
      t.tenantId,
      "--scopes",
      "servers:read,replays:read",
      "--member",
      t.ownerId,
    );
    const unbound = await replayctl("key", "create", "--tenant", t.tenantId, "--scopes", "collections:write");
    expect(await replayctl("key", "revoke", "--key-id", bound.keyId)).toEqual({ keyId: bound.keyId });
    const other = await provisionTenant(sys);

    const run = await runReplayctl(sys.internalUrl, ["key", "list", "--tenant", t.tenantId]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.out).toEqual({
      keys: [
        {
          keyId: t.keyId,
          scopes: ALL_SCOPES,
          memberId: t.ownerId,
          createdAt: expect.stringMatching(ISO),
          revokedAt: null,
        },
        {
          keyId: bound.keyId,
          scopes: ["servers:read", "replays:read"],
          memberId: t.ownerId,
          createdAt: expect.stringMatching(ISO),
          revokedAt: expect.stringMatching(ISO),
        },
        {
          keyId: unbound.keyId,
          scopes: ["collections:write"],
          memberId: null,
          createdAt: expect.stringMatching(ISO),
          revokedAt: null,
        },
      ],
      nextPageToken: "",
    });
    for (const key of [t.key, bound.key, unbound.key]) {
      expect(run.stdout).not.toContain(key);
      expect(run.stdout).not.toContain(key.slice("svc_live_".length));
      expect(run.stdout).not.toContain(sha256(key));
    }
    expect(run.stdout).not.toContain("svc_live_");
    // The other tenant's key is in neither direction's list.
    expect(run.stdout).not.toContain(other.keyId);
    const theirs = await replayctl("key", "list", "--tenant", other.tenantId);
    expect(theirs.keys.map((k: { keyId: string }) => k.keyId)).toEqual([other.keyId]);
  });

  it("key list pages with --page-size and --page-token, and refuses a token from another tenant's list", async () => {
    const t = await provisionTenant(sys);
    const second = await t.mintKey(["servers:read"]);
    const third = await t.mintKey(["replays:read"]);
    const first = await replayctl("key", "list", "--tenant", t.tenantId, "--page-size", "2");
    expect(first.keys.map((k: { keyId: string }) => k.keyId)).toEqual([t.keyId, second.keyId]);
    expect(first.nextPageToken).not.toBe("");
    const next = await replayctl(
      "key",
      "list",
      "--tenant",
      t.tenantId,
      "--page-size",
      "2",
      "--page-token",
      first.nextPageToken,
    );
    expect(next.keys.map((k: { keyId: string }) => k.keyId)).toEqual([third.keyId]);
    expect(next.nextPageToken).toBe("");

    const other = await provisionTenant(sys);
    for (const token of [first.nextPageToken, "not-a-token"]) {
      const run = await runReplayctl(sys.internalUrl, [
        "key",
        "list",
        "--tenant",
        other.tenantId,
        "--page-token",
        token,
      ]);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe("");
      expect(run.problem).toMatchObject({ status: 400, code: "INVALID_PAGE_TOKEN" });
    }
    const tooBig = await runReplayctl(sys.internalUrl, ["key", "list", "--tenant", t.tenantId, "--page-size", "101"]);
    expect(tooBig.problem).toMatchObject({ status: 400, code: "INVALID_PAGE_SIZE" });
  });

  it("member list shows roles, instance settings, grants and removal, only of the tenant asked for", async () => {
    const t = await provisionTenant(sys);
    const { categoryId } = await replayctl("category", "create", "--tenant", t.tenantId, "--name", "granted");
    const serverId = randomUUID();
    const { memberId: viewer } = await replayctl(
      "member",
      "add",
      "--tenant",
      t.tenantId,
      "--role",
      "viewer",
      "--instance-settings",
      "false",
    );
    const { memberId: gone } = await replayctl("member", "add", "--tenant", t.tenantId, "--role", "member");
    await replayctl("member", "grant", "--member", gone, "--category", categoryId);
    await replayctl("member", "grant", "--member", gone, "--server", serverId);
    await replayctl("member", "remove", "--member", gone);
    const other = await provisionTenant(sys);
    await sys.admin.addMember({ tenantId: other.tenantId, role: MemberRole.ADMIN });

    const out = await replayctl("member", "list", "--tenant", t.tenantId);
    const common = { createdAt: expect.stringMatching(ISO), grantedCategoryIds: [], grantedServerIds: [] };
    expect(out).toEqual({
      members: [
        { ...common, memberId: t.ownerId, role: "owner", instanceSettings: true, removed: false, removedAt: null },
        { ...common, memberId: viewer, role: "viewer", instanceSettings: false, removed: false, removedAt: null },
        {
          ...common,
          memberId: gone,
          role: "member",
          instanceSettings: true,
          removed: true,
          removedAt: expect.stringMatching(ISO),
          grantedCategoryIds: [categoryId],
          grantedServerIds: [serverId],
        },
      ],
      nextPageToken: "",
    });
    const theirs = await replayctl("member", "list", "--tenant", other.tenantId);
    expect(theirs.members.map((m: { role: string }) => m.role)).toEqual(["owner", "admin"]);
    expect(JSON.stringify(theirs)).not.toContain(t.ownerId);
  });

  it("category list shows the tenant's categories in creation order, and no other tenant's", async () => {
    const t = await provisionTenant(sys);
    const other = await provisionTenant(sys);
    expect(await replayctl("category", "list", "--tenant", t.tenantId)).toEqual({ categories: [], nextPageToken: "" });
    const eu = await replayctl("category", "create", "--tenant", t.tenantId, "--name", "  eu-west ");
    const theirs = await replayctl("category", "create", "--tenant", other.tenantId, "--name", "theirs");
    const us = await replayctl("category", "create", "--tenant", t.tenantId, "--name", "us-east");
    expect(await replayctl("category", "list", "--tenant", t.tenantId)).toEqual({
      categories: [
        { categoryId: eu.categoryId, name: "eu-west", createdAt: expect.stringMatching(ISO) },
        { categoryId: us.categoryId, name: "us-east", createdAt: expect.stringMatching(ISO) },
      ],
      nextPageToken: "",
    });
    const first = await replayctl("category", "list", "--tenant", t.tenantId, "--page-size", "1");
    expect(first.categories.map((c: { categoryId: string }) => c.categoryId)).toEqual([eu.categoryId]);
    const next = await replayctl("category", "list", "--tenant", t.tenantId, "--page-token", first.nextPageToken);
    expect(next.categories.map((c: { categoryId: string }) => c.categoryId)).toEqual([us.categoryId]);
    const crossed = await runReplayctl(sys.internalUrl, [
      "category",
      "list",
      "--tenant",
      other.tenantId,
      "--page-token",
      first.nextPageToken,
    ]);
    expect(crossed.problem).toMatchObject({ status: 400, code: "INVALID_PAGE_TOKEN" });
    const mine = await replayctl("category", "list", "--tenant", other.tenantId);
    expect(mine.categories.map((c: { categoryId: string }) => c.categoryId)).toEqual([theirs.categoryId]);
  });

  it.each([
    ["not-a-uuid", 400, "INVALID_ARGUMENT"],
    [randomUUID(), 404, "TENANT_NOT_FOUND"],
  ])("answers --tenant %s as tenant show does (%i %s)", async (tenant, status, code) => {
    const show = await runReplayctl(sys.internalUrl, ["tenant", "show", "--tenant", tenant]);
    expect(show.problem).toMatchObject({ status, code });
    for (const noun of ["key", "member", "category"]) {
      const run = await runReplayctl(sys.internalUrl, [noun, "list", "--tenant", tenant]);
      expect({ code: run.code, stdout: run.stdout }, noun).toEqual({ code: 1, stdout: "" });
      expect(run.problem, noun).toEqual({ ...show.problem, detail: expect.any(String) });
      expect(run.problem.detail, noun).toBe(show.problem.detail);
    }
  });
});
