import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ConnectRouter, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServerStatus, ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { DomainError } from "../lib/errors.js";
import { contextHeaders } from "../lib/rpc/context.js";
import { errorInterceptor } from "../lib/rpc/errors.js";
import { type Clients, type Command, createClients, type Output } from "./command.js";
import { commands, parseCommandLine, runCommand, usageOf } from "./commands.js";
import { parseRfc3339 } from "./flags.js";
import { type CallContext, CliError, failureOf } from "./output.js";

const call: CallContext = { command: "tenant show", baseUrl: "http://127.0.0.1:8081" };

/** The problem a command line is refused with, or a failed expectation when it parses. */
function refusal(argv: string[]) {
  try {
    parseCommandLine(argv);
  } catch (err) {
    return failureOf(err, call);
  }
  throw new Error(`${argv.join(" ")} was expected to be refused`);
}

function parsed(argv: string[]) {
  const invocation = parseCommandLine(argv);
  if (invocation.kind !== "run") throw new Error(`${argv.join(" ")} parsed as help`);
  return invocation;
}

/** Runs a command line against in-memory services (no network), through the real error interceptor. */
function runAgainst(routes: (router: ConnectRouter) => void, argv: string[]): Promise<Output> {
  const transport = createRouterTransport(routes, { router: { interceptors: [errorInterceptor] } });
  const clients: Clients = createClients(transport);
  return runCommand(parsed(argv), clients);
}

async function failureAgainst(routes: (router: ConnectRouter) => void, argv: string[]) {
  try {
    await runAgainst(routes, argv);
  } catch (err) {
    return failureOf(err, { command: argv.slice(0, 2).join(" "), baseUrl: call.baseUrl });
  }
  throw new Error(`${argv.join(" ")} was expected to fail`);
}

describe("parseCommandLine", () => {
  it("asks for help with --help, -h or help, and refuses no arguments at all as a usage error (exit 2)", () => {
    expect(refusal([])).toMatchObject({ exitCode: 2, problem: { code: "INVALID_ARGUMENT" } });
    expect(parseCommandLine(["help"])).toEqual({ kind: "help" });
    expect(parseCommandLine(["--help"])).toEqual({ kind: "help" });
    expect(parseCommandLine(["tenant", "create", "-h"])).toEqual({ kind: "help" });
  });

  it("knows every command of operations.md", () => {
    const names = commands.map((c: Command) => `${c.noun} ${c.verb}`);
    expect(names).toEqual([
      "tenant create",
      "tenant update",
      "tenant show",
      "tenant list",
      "member add",
      "member update",
      "member remove",
      "member grant",
      "member list",
      "key create",
      "key revoke",
      "key list",
      "signing-key create",
      "secrets reencrypt",
      "outbox status",
      "webhook backlog",
      "category create",
      "category list",
      "recorder checkin",
      "recording start",
      "recording finish",
      "asset set",
      "collection release",
      "collection revoke",
      "replay expire",
    ]);
  });

  it.each([
    [["tenant", "destroy"], /unknown command "tenant destroy"/],
    [["tenant"], /"tenant" needs a verb/],
    [["widget", "spin"], /unknown command "widget spin"/],
    [["tenant", "show"], /--tenant is required/],
    [["tenant", "create", "--server-limit", "ten"], /--server-limit must be an integer/],
    [["tenant", "create", "--server-limit", "1.5"], /--server-limit must be an integer/],
    [["tenant", "create", "--server-limit=-1"], /--server-limit must be between 0/],
    [["tenant", "create", "--storage-quota-bytes", "9223372036854775808"], /--storage-quota-bytes must be between/],
    [["tenant", "create", "--rate-limit-rps", "0"], /--rate-limit-rps must be between 1/],
    [["tenant", "create", "--rate-limit-burst", "2147483648"], /--rate-limit-burst must be between/],
    [["tenant", "create", "--colour", "red"], /Unknown option '--colour'/],
    [["tenant", "create", "--retention-days", "0"], /--retention-days must be between 1 and 3650, got 0/],
    [["tenant", "update", "--tenant", "t", "--retention-days", "3651"], /--retention-days must be between 1 and 3650/],
    [["tenant", "create", "--hot-days=-1"], /--hot-days must be between 0 and 3650/],
    [["tenant", "create", "--hot-days", "1d"], /--hot-days must be an integer/],
    [["tenant", "create", "stray"], /stray/],
    [["tenant", "show", "--tenant"], /--tenant/],
    [["tenant", "show", "--tenant", "a", "--tenant", "b"], /--tenant is given more than once/],
    [["member", "add", "--tenant", "t", "--role", "boss"], /--role must be one of owner, admin, member, viewer/],
    [
      ["member", "add", "--tenant", "t", "--role", "owner", "--instance-settings", "yes"],
      /--instance-settings must be true or false/,
    ],
    [["member", "grant", "--member", "m"], /exactly one of --category, --server/],
    [["member", "grant", "--member", "m", "--category", "c", "--server", "s"], /exactly one of --category, --server/],
    [["key", "create", "--tenant", "t"], /--scopes is required/],
    [["recorder", "checkin", "--server", "s", "--at", "yesterday"], /--at must be an RFC 3339 date-time/],
    [["recorder", "checkin", "--server", "s", "--at", "2023-02-29T00:00:00Z"], /--at must be an RFC 3339/],
    [["recording", "start", "--server", "s", "--quality", "4k"], /--quality must be one of standard, hd/],
    [["recording", "finish", "--replay", "r", "--size-bytes", "1e3"], /--size-bytes must be an integer/],
    [["asset", "set", "--replay", "r", "--state", "done"], /--state must be one of processing, ready, failed/],
    [["asset", "set", "--replay", "r"], /--state is required/],
    [["key", "list"], /--tenant is required/],
    [["member", "list", "--tenant", "t", "--page-size", "0"], /--page-size must be between 1/],
    [["tenant", "list", "--page-size", "ten"], /--page-size must be an integer/],
    [["category", "list", "--tenant", "t", "--name", "x"], /Unknown option '--name'/],
  ])("refuses %j as INVALID_ARGUMENT, exit 2, naming the problem", (argv, detail) => {
    const { problem, exitCode } = refusal(argv);
    expect(exitCode).toBe(2);
    expect(problem).toMatchObject({ type: "about:blank", title: "Bad Request", status: 400, code: "INVALID_ARGUMENT" });
    expect(problem.detail).toMatch(detail);
    expect(problem.detail).toMatch(/usage: replayctl/);
    expect(problem.detail).not.toMatch(/\n/);
  });

  it("shows the usage line of the command it refuses", () => {
    expect(refusal(["member", "grant", "--member", "m"]).problem.detail).toContain(
      "usage: replayctl member grant --member M (--category C | --server S)",
    );
  });

  it("parses typed values: integers as bigint or number, booleans, enums, lists and dates", () => {
    expect(parsed(["tenant", "create", "--server-limit", "3", "--rate-limit-rps", "7", "--name", ""]).values).toEqual({
      "server-limit": 3n,
      "rate-limit-rps": 7,
      name: "",
    });
    expect(
      parsed(["member", "add", "--tenant", "t", "--role", "viewer", "--instance-settings", "false"]).values,
    ).toEqual({
      tenant: "t",
      role: MemberRole.VIEWER,
      "instance-settings": false,
    });
    expect(parsed(["key", "create", "--tenant", "t", "--scopes", "replays:read, servers:write,"]).values).toEqual({
      tenant: "t",
      scopes: ["replays:read", "servers:write"],
    });
    expect(parsed(["recorder", "checkin", "--server", "s", "--at=2024-05-01T12:00:00.250Z"]).values).toEqual({
      server: "s",
      at: new Date("2024-05-01T12:00:00.250Z"),
    });
  });

  it("passes ids through unchecked, so the service answers with its own code", () => {
    expect(parsed(["recording", "start", "--server", "not-a-uuid"]).values).toEqual({ server: "not-a-uuid" });
  });

  it("builds usage lines in the shape of operations.md", () => {
    const usage = (name: string) => usageOf(commands.find((c) => `${c.noun} ${c.verb}` === name) as Command);
    expect(usage("member add")).toBe(
      "replayctl member add --tenant T --role owner|admin|member|viewer [--instance-settings true|false]",
    );
    expect(usage("key create")).toBe("replayctl key create --tenant T --scopes a,b,c [--member M]");
    expect(usage("asset set")).toBe("replayctl asset set --replay R --state processing|ready|failed");
    expect(usage("tenant list")).toBe("replayctl tenant list [--page-size N] [--page-token P]");
    expect(usage("key list")).toBe("replayctl key list --tenant T [--page-size N] [--page-token P]");
  });
});

describe("parseRfc3339", () => {
  it.each([
    ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.000Z"],
    ["2024-05-01t12:00:00z", "2024-05-01T12:00:00.000Z"],
    ["2024-05-01 12:00:00.1234567Z", "2024-05-01T12:00:00.123Z"],
    ["2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00.000Z"],
    ["2024-05-01T00:30:00-01:30", "2024-05-01T02:00:00.000Z"],
    ["2024-02-29T00:00:00Z", "2024-02-29T00:00:00.000Z"],
  ])("reads %s as %s", (raw, iso) => {
    expect(parseRfc3339(raw)?.toISOString()).toBe(iso);
  });

  it.each([
    "2024-05-01",
    "2024-05-01T12:00:00",
    "2024-13-01T00:00:00Z",
    "2023-02-29T00:00:00Z",
    "2024-05-01T24:00:00Z",
    "2024-05-01T12:00:00+25:00",
    "1714564800",
  ])("refuses %s", (raw) => {
    expect(parseRfc3339(raw)).toBeUndefined();
  });
});

describe("commands", () => {
  it("tenant create sends only the plan fields that were given, so server-side defaults apply", async () => {
    const seen: unknown[] = [];
    const routes = (router: ConnectRouter) =>
      router.service(IdentityAdminService, {
        createTenant(req) {
          seen.push({
            name: req.name,
            serverLimit: req.serverLimit,
            rps: req.rateLimitRps,
            burst: req.rateLimitBurst,
            quota: req.storageQuotaBytes,
            retention: req.retentionDays,
            hot: req.hotDays,
          });
          return { tenantId: "t-1" };
        },
      });
    expect(await runAgainst(routes, ["tenant", "create"])).toEqual({ tenantId: "t-1" });
    expect(await runAgainst(routes, ["tenant", "create", "--server-limit", "0", "--rate-limit-burst", "5"])).toEqual({
      tenantId: "t-1",
    });
    expect(await runAgainst(routes, ["tenant", "create", "--retention-days", "1", "--hot-days", "0"])).toEqual({
      tenantId: "t-1",
    });
    const unset = { name: undefined, serverLimit: undefined, rps: undefined, burst: undefined, quota: undefined };
    expect(seen).toEqual([
      { ...unset, retention: undefined, hot: undefined },
      { ...unset, serverLimit: 0n, burst: 5, retention: undefined, hot: undefined },
      { ...unset, retention: 1, hot: 0 },
    ]);
  });

  it("tenant show prints every plan and usage field as JSON numbers", async () => {
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          getTenant: (req) => ({
            tenant: {
              tenantId: req.tenantId,
              name: "Acme",
              serverLimit: 10n,
              serversUsed: 2n,
              storageQuotaBytes: 10737418240n,
              storageUsedBytes: 1024n,
              rateLimitRps: 50,
              rateLimitBurst: 100,
              retentionDays: 7,
              hotDays: 0,
            },
          }),
        }),
      ["tenant", "show", "--tenant", "t-1"],
    );
    expect(out).toEqual({
      tenantId: "t-1",
      name: "Acme",
      serverLimit: 10,
      serversUsed: 2,
      storageQuotaBytes: 10737418240,
      storageUsedBytes: 1024,
      rateLimitRps: 50,
      rateLimitBurst: 100,
      retentionDays: 7,
      hotDays: 0,
    });
    expect(JSON.stringify(out)).toContain('"serverLimit":10,');
  });

  it("member update leaves role and instance settings unset when their flags are omitted", async () => {
    let seen: unknown;
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          updateMember(req) {
            seen = { role: req.role, instanceSettings: req.instanceSettings };
            return { memberId: req.memberId };
          },
        }),
      ["member", "update", "--member", "m-1"],
    );
    expect(out).toEqual({ memberId: "m-1" });
    expect(seen).toEqual({ role: MemberRole.UNSPECIFIED, instanceSettings: undefined });
  });

  it("key create sends the scopes as a list and no member without --member", async () => {
    let seen: unknown;
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          createApiKey(req) {
            seen = { scopes: req.scopes, memberId: req.memberId };
            return { keyId: "k-1", key: "svc_live_x" };
          },
        }),
      ["key", "create", "--tenant", "t", "--scopes", "replays:read,replays:write"],
    );
    expect(out).toEqual({ keyId: "k-1", key: "svc_live_x" });
    expect(seen).toEqual({ scopes: ["replays:read", "replays:write"], memberId: "" });
  });

  it("category create carries the tenant in the trusted context header", async () => {
    let tenant: string | null = null;
    const out = await runAgainst(
      (router) =>
        router.service(ServersService, {
          createCategory(req, ctx) {
            tenant = ctx.requestHeader.get(contextHeaders.tenant);
            return { category: { categoryId: "c-1", name: req.name } };
          },
        }),
      ["category", "create", "--tenant", "t-9", "--name", "EU"],
    );
    expect(out).toEqual({ categoryId: "c-1" });
    expect(tenant).toBe("t-9");
  });

  it("tenant list prints each tenant's plan as JSON numbers with an RFC 3339 createdAt, and the next page token", async () => {
    let seen: unknown;
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          listTenants(req) {
            seen = { pageSize: req.pageSize, pageToken: req.pageToken };
            return {
              tenants: [
                {
                  tenantId: "t-1",
                  name: "Acme",
                  serverLimit: 10n,
                  storageQuotaBytes: 10737418240n,
                  rateLimitRps: 50,
                  rateLimitBurst: 100,
                  retentionDays: 90,
                  hotDays: 30,
                  createdAt: timestampFromDate(new Date("2024-05-01T12:00:00.250Z")),
                },
              ],
              nextPageToken: "t-1",
            };
          },
        }),
      ["tenant", "list", "--page-size", "1", "--page-token", "t-0"],
    );
    expect(seen).toEqual({ pageSize: 1, pageToken: "t-0" });
    expect(out).toEqual({
      tenants: [
        {
          tenantId: "t-1",
          name: "Acme",
          serverLimit: 10,
          storageQuotaBytes: 10737418240,
          rateLimitRps: 50,
          rateLimitBurst: 100,
          retentionDays: 90,
          hotDays: 30,
          createdAt: "2024-05-01T12:00:00.250Z",
        },
      ],
      nextPageToken: "t-1",
    });
  });

  it("list commands leave the page unset without --page-size and --page-token, so the service's default applies", async () => {
    let seen: unknown;
    await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          listApiKeys(req) {
            seen = { tenantId: req.tenantId, pageSize: req.pageSize, pageToken: req.pageToken };
            return { keys: [], nextPageToken: "" };
          },
        }),
      ["key", "list", "--tenant", "t-9"],
    );
    expect(seen).toEqual({ tenantId: "t-9", pageSize: undefined, pageToken: "" });
  });

  it("key list prints an unbound key's member as null and a live key's revokedAt as null", async () => {
    const at = timestampFromDate(new Date("2024-05-01T12:00:00Z"));
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          listApiKeys: () => ({
            keys: [
              { keyId: "k-1", scopes: ["replays:read"], memberId: "", createdAt: at },
              {
                keyId: "k-2",
                scopes: ["servers:read", "servers:write"],
                memberId: "m-1",
                createdAt: at,
                revokedAt: at,
              },
            ],
            nextPageToken: "",
          }),
        }),
      ["key", "list", "--tenant", "t-1"],
    );
    expect(out).toEqual({
      keys: [
        {
          keyId: "k-1",
          scopes: ["replays:read"],
          memberId: null,
          createdAt: "2024-05-01T12:00:00.000Z",
          revokedAt: null,
        },
        {
          keyId: "k-2",
          scopes: ["servers:read", "servers:write"],
          memberId: "m-1",
          createdAt: "2024-05-01T12:00:00.000Z",
          revokedAt: "2024-05-01T12:00:00.000Z",
        },
      ],
      nextPageToken: "",
    });
  });

  it("member list prints roles by name and removed as a boolean beside removedAt", async () => {
    const at = timestampFromDate(new Date("2024-05-01T12:00:00Z"));
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          listMembers: () => ({
            members: [
              { memberId: "m-1", role: MemberRole.OWNER, instanceSettings: true, createdAt: at },
              {
                memberId: "m-2",
                role: MemberRole.MEMBER,
                instanceSettings: false,
                createdAt: at,
                removedAt: at,
                grantedCategoryIds: ["c-1"],
                grantedServerIds: ["s-1"],
              },
            ],
            nextPageToken: "",
          }),
        }),
      ["member", "list", "--tenant", "t-1"],
    );
    const createdAt = "2024-05-01T12:00:00.000Z";
    expect(out).toEqual({
      members: [
        {
          memberId: "m-1",
          role: "owner",
          instanceSettings: true,
          removed: false,
          removedAt: null,
          grantedCategoryIds: [],
          grantedServerIds: [],
          createdAt,
        },
        {
          memberId: "m-2",
          role: "member",
          instanceSettings: false,
          removed: true,
          removedAt: createdAt,
          grantedCategoryIds: ["c-1"],
          grantedServerIds: ["s-1"],
          createdAt,
        },
      ],
      nextPageToken: "",
    });
  });

  it("category list asks the admin API with the tenant as a request field", async () => {
    let seen: unknown;
    const out = await runAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          listCategories(req) {
            seen = req.tenantId;
            return {
              categories: [{ categoryId: "c-1", name: "EU", createdAt: timestampFromDate(new Date(0)) }],
              nextPageToken: "",
            };
          },
        }),
      ["category", "list", "--tenant", "t-9"],
    );
    expect(seen).toBe("t-9");
    expect(out).toEqual({
      categories: [{ categoryId: "c-1", name: "EU", createdAt: "1970-01-01T00:00:00.000Z" }],
      nextPageToken: "",
    });
  });

  it("recorder checkin sends --at as a Timestamp and prints status and an RFC 3339 lastSeenAt", async () => {
    let at: string | undefined;
    const out = await runAgainst(
      (router) =>
        router.service(RecorderService, {
          checkIn(req) {
            at = req.at && timestampDate(req.at).toISOString();
            return { serverId: req.serverId, status: ServerStatus.OFFLINE, lastSeenAt: req.at };
          },
        }),
      ["recorder", "checkin", "--server", "s-1", "--at", "2024-05-01T12:00:00.250+00:00"],
    );
    expect(at).toBe("2024-05-01T12:00:00.250Z");
    expect(out).toEqual({ serverId: "s-1", status: "offline", lastSeenAt: "2024-05-01T12:00:00.250Z" });
  });

  it("recorder checkin prints online for an online server", async () => {
    const out = await runAgainst(
      (router) =>
        router.service(RecorderService, {
          checkIn: (req) => ({
            serverId: req.serverId,
            status: ServerStatus.ONLINE,
            lastSeenAt: timestampFromDate(new Date("2024-01-02T03:04:05.006Z")),
          }),
        }),
      ["recorder", "checkin", "--server", "s-1"],
    );
    expect(out).toEqual({ serverId: "s-1", status: "online", lastSeenAt: "2024-01-02T03:04:05.006Z" });
  });
});

describe("failureOf", () => {
  it("takes the contract code of a service refusal from its ErrorDetail and the status from the table", async () => {
    const failure = await failureAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          getTenant() {
            throw new DomainError("TENANT_NOT_FOUND", "no tenant with id t-1");
          },
        }),
      ["tenant", "show", "--tenant", "t-1"],
    );
    expect(failure).toEqual({
      exitCode: 1,
      problem: {
        type: "about:blank",
        title: "Not Found",
        status: 404,
        code: "TENANT_NOT_FOUND",
        detail: "no tenant with id t-1",
      },
    });
  });

  it("carries field violations as errors[]", async () => {
    const failure = await failureAgainst(
      (router) =>
        router.service(IdentityAdminService, {
          createApiKey() {
            throw new DomainError("INVALID_ARGUMENT", "bad scopes", [
              { field: "scopes", code: "VALIDATION_ERROR", detail: "unknown scope x" },
            ]);
          },
        }),
      ["key", "create", "--tenant", "t", "--scopes", "x"],
    );
    expect(failure.problem).toMatchObject({
      status: 400,
      code: "INVALID_ARGUMENT",
      errors: [{ field: "scopes", code: "VALIDATION_ERROR", detail: "unknown scope x" }],
    });
    expect(failure.exitCode).toBe(1);
  });

  it("reports a service that is not built yet as NOT_IMPLEMENTED naming the command", async () => {
    const failure = await failureAgainst(
      (router) => router.service(IdentityAdminService, {}),
      ["replay", "expire", "--replay", "r-1"],
    );
    expect(failure).toEqual({
      exitCode: 1,
      problem: {
        type: "about:blank",
        title: "Not Implemented",
        status: 501,
        code: "NOT_IMPLEMENTED",
        detail: "replay expire is not available yet: its service is not implemented",
      },
    });
  });

  it("reports an unreachable system as SERVICE_UNAVAILABLE naming REPLAYCTL_URL", () => {
    const refused = new ConnectError("connect ECONNREFUSED 127.0.0.1:8081", Code.Unavailable);
    const reset = new ConnectError(
      "socket hang up",
      Code.Aborted,
      undefined,
      undefined,
      Object.assign(new Error("reset"), { code: "ECONNRESET" }),
    );
    for (const err of [refused, reset]) {
      const { problem, exitCode } = failureOf(err, call);
      expect(exitCode).toBe(1);
      expect(problem).toMatchObject({ status: 503, code: "SERVICE_UNAVAILABLE", title: "Service Unavailable" });
      expect(problem.detail).toContain("REPLAYCTL_URL=http://127.0.0.1:8081");
    }
  });

  it("reports a bare Internal error and any unexpected throw as INTERNAL_ERROR", () => {
    expect(failureOf(new ConnectError("internal error", Code.Internal), call).problem).toMatchObject({
      status: 500,
      code: "INTERNAL_ERROR",
    });
    expect(failureOf(new TypeError("boom"), call)).toMatchObject({
      exitCode: 1,
      problem: { status: 500, code: "INTERNAL_ERROR" },
    });
  });

  it("keeps exit code 2 for usage errors and 1 for other failures of replayctl itself", () => {
    expect(failureOf(new CliError("INVALID_ARGUMENT", "bad", 2), call).exitCode).toBe(2);
    expect(failureOf(new CliError("INTERNAL_ERROR", "odd answer"), call)).toMatchObject({
      exitCode: 1,
      problem: { status: 500 },
    });
  });
});
