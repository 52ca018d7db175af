import { parseArgs } from "node:util";
import { type Timestamp, timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { AssetState, RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { Quality } from "../gen/replay/replays/v1/replays_pb.js";
import { RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServerStatus, ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { trustedHeaders } from "../lib/rpc/context.js";
import { CliError, usageError } from "./output.js";

/** The service clients a command may call; all of them share the one transport to REPLAYCTL_URL. */
export type Clients = {
  admin: Client<typeof IdentityAdminService>;
  servers: Client<typeof ServersService>;
  recorder: Client<typeof RecorderService>;
  recording: Client<typeof RecordingService>;
};

/** Creates every client replayctl uses on one transport. */
export function createClients(transport: Transport): Clients {
  return {
    admin: createClient(IdentityAdminService, transport),
    servers: createClient(ServersService, transport),
    recorder: createClient(RecorderService, transport),
    recording: createClient(RecordingService, transport),
  };
}

/** The one JSON object a command prints on stdout. */
export type Output = Record<string, string | number | null>;

/** One `--flag VALUE`: how usage shows its value, whether it must be given, and its parser. */
export type Flag<T = unknown, R extends boolean = boolean> = {
  hint: string;
  required: R;
  parse: (raw: string, name: string) => T;
};

type FlagSet = Record<string, Flag>;
type ValueOf<F> = F extends Flag<infer T> ? T : never;
type RequiredKeys<F extends FlagSet> = { [K in keyof F]: F[K] extends Flag<unknown, true> ? K : never }[keyof F];

/** Parsed flag values, keyed by flag name: required flags are always present. */
export type Values<F extends FlagSet> = { [K in RequiredKeys<F>]: ValueOf<F[K]> } & {
  [K in Exclude<keyof F, RequiredKeys<F>>]?: ValueOf<F[K]>;
};

/** One row of the command table: `<noun> <verb>`, its flags, and the call it makes. */
export type Command<F extends FlagSet = FlagSet> = {
  noun: string;
  verb: string;
  flags: F;
  // Flags of which exactly one must be given (member grant's target).
  exactlyOne?: readonly (keyof F & string)[];
  run: (clients: Clients, values: Values<F>) => Promise<Output>;
};

// Each row is typed against its own flags; the table holds them erased, which is sound because
// parseCommandLine only ever hands a row the values parsed from that row's flags.
function command<F extends FlagSet>(row: Command<F>): Command {
  return row as unknown as Command;
}

// --- Flag parsers. Each refuses a bad value naming the flag; the server re-validates ranges.

function text(hint: string): Flag<string, false> {
  return { hint, required: false, parse: (raw) => raw };
}

function required<T>(flag: Flag<T>): Flag<T, true> {
  return { ...flag, required: true };
}

const INT64_MAX = 2n ** 63n - 1n;
const INT32_MAX = 2 ** 31 - 1;

function integer(raw: string, name: string, min: bigint, max: bigint): bigint {
  if (!/^[+-]?\d+$/.test(raw)) throw usageError(`--${name} must be an integer, got "${raw}"`);
  const value = BigInt(raw);
  if (value < min || value > max) throw usageError(`--${name} must be between ${min} and ${max}, got ${raw}`);
  return value;
}

function int64(min: bigint): Flag<bigint, false> {
  return { hint: "N", required: false, parse: (raw, name) => integer(raw, name, min, INT64_MAX) };
}

function int32(min: number): Flag<number, false> {
  return {
    hint: "N",
    required: false,
    parse: (raw, name) => Number(integer(raw, name, BigInt(min), BigInt(INT32_MAX))),
  };
}

function bool(): Flag<boolean, false> {
  return {
    hint: "true|false",
    required: false,
    parse: (raw, name) => {
      if (raw === "true") return true;
      if (raw === "false") return false;
      throw usageError(`--${name} must be true or false, got "${raw}"`);
    },
  };
}

function choice<E>(choices: Record<string, E>): Flag<E, false> {
  const names = Object.keys(choices);
  return {
    hint: names.join("|"),
    required: false,
    parse: (raw, name) => {
      if (!Object.hasOwn(choices, raw)) throw usageError(`--${name} must be one of ${names.join(", ")}, got "${raw}"`);
      return choices[raw] as E;
    },
  };
}

function list(hint: string): Flag<string[], false> {
  return {
    hint,
    required: false,
    parse: (raw) =>
      raw
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item !== ""),
  };
}

// RFC 3339 date-time: T or space between date and time, optional fraction, Z or a numeric offset.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Parses an RFC 3339 date-time, refusing impossible dates that Date would silently roll over. */
export function parseRfc3339(raw: string): Date | undefined {
  const m = RFC3339.exec(raw);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ms = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  const offsetMinutes = m[8] ? 0 : (m[9] === "-" ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11]));
  if (hour > 23 || minute > 59 || second > 59 || Number(m[10] ?? 0) > 23 || Number(m[11] ?? 0) > 59) return undefined;
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day);
  if (local.getUTCFullYear() !== year || local.getUTCMonth() !== month - 1 || local.getUTCDate() !== day)
    return undefined;
  local.setUTCHours(hour, minute, second, ms);
  return new Date(local.getTime() - offsetMinutes * 60_000);
}

function time(): Flag<Date, false> {
  return {
    hint: "RFC3339",
    required: false,
    parse: (raw, name) => {
      const date = parseRfc3339(raw);
      if (!date) throw usageError(`--${name} must be an RFC 3339 date-time such as 2024-05-01T12:00:00Z, got "${raw}"`);
      return date;
    },
  };
}

// --- Response helpers.

/** A field the service must always set; its absence is a service fault, not an operator error. */
function present<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new CliError("INTERNAL_ERROR", `the service answered without ${what}`);
  return value;
}

function isoOrNull(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

function statusName(status: ServerStatus): "online" | "offline" {
  if (status === ServerStatus.ONLINE) return "online";
  if (status === ServerStatus.OFFLINE) return "offline";
  throw new CliError("INTERNAL_ERROR", "the service answered without a server status");
}

// --- The command table (spec/operations.md §replayctl). Optional plan and permission fields are
// sent only when their flag is given, so the server applies its plan defaults.

const roles = {
  owner: MemberRole.OWNER,
  admin: MemberRole.ADMIN,
  member: MemberRole.MEMBER,
  viewer: MemberRole.VIEWER,
};

const planFlags = {
  name: text("N"),
  "server-limit": int64(0n),
  "storage-quota-bytes": int64(0n),
  "rate-limit-rps": int32(1),
  "rate-limit-burst": int32(1),
};

function planOf(v: Values<typeof planFlags>) {
  return {
    name: v.name,
    serverLimit: v["server-limit"],
    storageQuotaBytes: v["storage-quota-bytes"],
    rateLimitRps: v["rate-limit-rps"],
    rateLimitBurst: v["rate-limit-burst"],
  };
}

const replayFlag = { replay: required(text("R")) };

export const commands: readonly Command[] = [
  command({
    noun: "tenant",
    verb: "create",
    flags: planFlags,
    run: async (c, v) => {
      const res = await c.admin.createTenant(planOf(v));
      return { tenantId: res.tenantId };
    },
  }),
  command({
    noun: "tenant",
    verb: "update",
    flags: { tenant: required(text("T")), ...planFlags },
    run: async (c, v) => {
      const res = await c.admin.updateTenant({ tenantId: v.tenant, ...planOf(v) });
      return { tenantId: res.tenantId };
    },
  }),
  command({
    noun: "tenant",
    verb: "show",
    flags: { tenant: required(text("T")) },
    run: async (c, v) => {
      const t = present((await c.admin.getTenant({ tenantId: v.tenant })).tenant, "a tenant");
      return {
        tenantId: t.tenantId,
        name: t.name,
        serverLimit: Number(t.serverLimit),
        serversUsed: Number(t.serversUsed),
        storageQuotaBytes: Number(t.storageQuotaBytes),
        storageUsedBytes: Number(t.storageUsedBytes),
        rateLimitRps: t.rateLimitRps,
        rateLimitBurst: t.rateLimitBurst,
      };
    },
  }),
  command({
    noun: "member",
    verb: "add",
    flags: { tenant: required(text("T")), role: required(choice(roles)), "instance-settings": bool() },
    run: async (c, v) => {
      const res = await c.admin.addMember({
        tenantId: v.tenant,
        role: v.role,
        instanceSettings: v["instance-settings"],
      });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "update",
    flags: { member: required(text("M")), role: choice(roles), "instance-settings": bool() },
    run: async (c, v) => {
      const res = await c.admin.updateMember({
        memberId: v.member,
        role: v.role ?? MemberRole.UNSPECIFIED,
        instanceSettings: v["instance-settings"],
      });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "remove",
    flags: { member: required(text("M")) },
    run: async (c, v) => {
      const res = await c.admin.removeMember({ memberId: v.member });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "grant",
    flags: { member: required(text("M")), category: text("C"), server: text("S") },
    exactlyOne: ["category", "server"],
    run: async (c, v) => {
      const res = await c.admin.grantMember({
        memberId: v.member,
        categoryId: v.category ?? "",
        serverId: v.server ?? "",
      });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "key",
    verb: "create",
    flags: { tenant: required(text("T")), scopes: required(list("a,b,c")), member: text("M") },
    run: async (c, v) => {
      // No --member mints a key from before member binding (empty member_id).
      const res = await c.admin.createApiKey({ tenantId: v.tenant, scopes: v.scopes, memberId: v.member ?? "" });
      return { keyId: res.keyId, key: res.key };
    },
  }),
  command({
    noun: "key",
    verb: "revoke",
    flags: { "key-id": required(text("K")) },
    run: async (c, v) => {
      const res = await c.admin.revokeApiKey({ keyId: v["key-id"] });
      return { keyId: res.keyId };
    },
  }),
  command({
    noun: "signing-key",
    verb: "create",
    flags: { tenant: required(text("T")) },
    run: async (c, v) => {
      const res = await c.admin.createSigningKey({ tenantId: v.tenant });
      return { kid: res.kid, secret: res.secret };
    },
  }),
  command({
    noun: "category",
    verb: "create",
    flags: { tenant: required(text("T")), name: required(text("N")) },
    run: async (c, v) => {
      // ServersService takes its tenant from the trusted context, as when the gateway calls it.
      const res = await c.servers.createCategory({ name: v.name }, { headers: trustedHeaders({ tenantId: v.tenant }) });
      return { categoryId: present(res.category, "a category").categoryId };
    },
  }),
  command({
    noun: "recorder",
    verb: "checkin",
    flags: { server: required(text("S")), "plugin-version": text("V"), at: time() },
    run: async (c, v) => {
      const res = await c.recorder.checkIn({
        serverId: v.server,
        pluginVersion: v["plugin-version"] ?? "",
        at: v.at && timestampFromDate(v.at),
      });
      return { serverId: res.serverId, status: statusName(res.status), lastSeenAt: isoOrNull(res.lastSeenAt) };
    },
  }),
  command({
    noun: "recording",
    verb: "start",
    flags: {
      server: required(text("S")),
      integration: text("I"),
      quality: choice({ standard: Quality.STANDARD, hd: Quality.HD }),
      "started-at": time(),
    },
    run: async (c, v) => {
      const res = await c.recording.startRecording({
        serverId: v.server,
        integration: v.integration ?? "",
        quality: v.quality ?? Quality.UNSPECIFIED,
        startedAt: v["started-at"] && timestampFromDate(v["started-at"]),
      });
      return { replayId: res.replayId };
    },
  }),
  command({
    noun: "recording",
    verb: "finish",
    flags: { ...replayFlag, "ended-at": time(), "size-bytes": int64(0n), "format-version": int32(1) },
    run: async (c, v) => {
      const res = await c.recording.finishRecording({
        replayId: v.replay,
        endedAt: v["ended-at"] && timestampFromDate(v["ended-at"]),
        sizeBytes: v["size-bytes"],
        formatVersion: v["format-version"],
      });
      return { replayId: res.replayId };
    },
  }),
  command({
    noun: "asset",
    verb: "set",
    flags: {
      ...replayFlag,
      state: required(
        choice({ processing: AssetState.PROCESSING, ready: AssetState.READY, failed: AssetState.FAILED }),
      ),
    },
    run: async (c, v) => {
      const res = await c.recording.setAssetState({ replayId: v.replay, state: v.state });
      return { replayId: res.replayId };
    },
  }),
  command({
    noun: "collection",
    verb: "release",
    flags: replayFlag,
    run: async (c, v) => ({ replayId: (await c.recording.releaseCollection({ replayId: v.replay })).replayId }),
  }),
  command({
    noun: "collection",
    verb: "revoke",
    flags: replayFlag,
    run: async (c, v) => ({ replayId: (await c.recording.revokeCollection({ replayId: v.replay })).replayId }),
  }),
  command({
    noun: "replay",
    verb: "expire",
    flags: replayFlag,
    run: async (c, v) => ({ replayId: (await c.recording.expireReplay({ replayId: v.replay })).replayId }),
  }),
];

// --- Command line parsing.

/** The usage line of one command, built from its flags so the two cannot drift apart. */
export function usageOf(cmd: Command): string {
  const parts = [`replayctl ${cmd.noun} ${cmd.verb}`];
  const group = cmd.exactlyOne ?? [];
  for (const [name, flag] of Object.entries(cmd.flags)) {
    if (group.includes(name)) {
      if (name === group[0]) parts.push(`(${group.map((g) => `--${g} ${cmd.flags[g]?.hint}`).join(" | ")})`);
    } else {
      parts.push(flag.required ? `--${name} ${flag.hint}` : `[--${name} ${flag.hint}]`);
    }
  }
  return parts.join(" ");
}

/** The full help text: every command's usage line. */
export function helpText(): string {
  return [
    "usage: replayctl <noun> <verb> [--flags]",
    "",
    "Talks to the system at REPLAYCTL_URL (default http://127.0.0.1:8081). Prints one JSON object",
    "on stdout; on failure exits 1 (2 for usage errors) with a problem object on stderr.",
    "",
    "commands:",
    ...commands.map((cmd) => `  ${usageOf(cmd)}`),
    "",
  ].join("\n");
}

/** What a command line asks for: the help text, or one command with its parsed flag values. */
export type Invocation =
  | { kind: "help" }
  | { kind: "run"; command: Command; name: string; values: Record<string, unknown> };

// Every flag is read as a string and parsed by the table, so the messages name the flag the
// operator typed; strict mode refuses unknown flags, missing values and stray positionals.
function splitFlags(args: readonly string[], names: readonly string[]) {
  return parseArgs({
    args: [...args],
    options: Object.fromEntries(names.map((name) => [name, { type: "string" as const }])),
    strict: true,
    allowPositionals: false,
    tokens: true,
  });
}

function isHelp(arg: string): boolean {
  return arg === "--help" || arg === "-h";
}

/**
 * Parses `<noun> <verb> [--flags]` against the command table. Throws a usage error (exit 2)
 * naming the offending flag and showing the command's usage line.
 */
export function parseCommandLine(argv: readonly string[]): Invocation {
  if (argv.length === 0 || argv.some(isHelp) || argv[0] === "help") return { kind: "help" };
  const [noun = "", verb = ""] = argv;
  const cmd = commands.find((c) => c.noun === noun && c.verb === verb);
  if (!cmd) {
    const verbs = commands.filter((c) => c.noun === noun).map((c) => c.verb);
    const detail =
      verbs.length > 0
        ? `${verb === "" ? `"${noun}" needs a verb` : `unknown command "${noun} ${verb}"`}; usage: replayctl ${noun} ${verbs.join("|")} [--flags]`
        : `unknown command "${argv.slice(0, 2).join(" ")}"; usage: replayctl <noun> <verb> [--flags] (replayctl --help lists the commands)`;
    throw usageError(detail);
  }
  const fail = (detail: string): never => {
    throw usageError(`${detail}; usage: ${usageOf(cmd)}`);
  };

  let parsed: ReturnType<typeof splitFlags>;
  try {
    parsed = splitFlags(argv.slice(2), Object.keys(cmd.flags));
  } catch (err) {
    // Node's messages span lines and end in a full stop; the detail is one line.
    const message = err instanceof Error ? err.message : String(err);
    return fail(message.replace(/\s*\n\s*/g, " ").replace(/\.$/, ""));
  }

  // parseArgs keeps the last of repeated flags silently; an operator who typed one twice meant something.
  const seen = new Set<string>();
  for (const token of parsed.tokens) {
    if (token.kind !== "option") continue;
    if (seen.has(token.name)) fail(`--${token.name} is given more than once`);
    seen.add(token.name);
  }

  const values: Record<string, unknown> = {};
  for (const [name, flag] of Object.entries(cmd.flags)) {
    const raw = parsed.values[name];
    if (typeof raw !== "string") {
      if (flag.required) fail(`--${name} is required`);
      continue;
    }
    try {
      values[name] = flag.parse(raw, name);
    } catch (err) {
      if (err instanceof CliError) fail(err.detail);
      throw err;
    }
  }

  if (cmd.exactlyOne) {
    const given = cmd.exactlyOne.filter((name) => values[name] !== undefined);
    if (given.length !== 1) fail(`exactly one of ${cmd.exactlyOne.map((n) => `--${n}`).join(", ")} is required`);
  }
  return { kind: "run", command: cmd, name: `${cmd.noun} ${cmd.verb}`, values };
}

/** Runs a parsed command against the clients. */
export function runCommand(invocation: Extract<Invocation, { kind: "run" }>, clients: Clients): Promise<Output> {
  return invocation.command.run(clients, invocation.values as Values<FlagSet>);
}
