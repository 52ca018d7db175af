import { parseArgs } from "node:util";
import type { Clients, Command, FlagSet, Output, Values } from "./command.js";
import { assetCommands } from "./commands/asset.js";
import { categoryCommands } from "./commands/category.js";
import { collectionCommands } from "./commands/collection.js";
import { keyCommands } from "./commands/key.js";
import { memberCommands } from "./commands/member.js";
import { onCallCommands } from "./commands/on-call.js";
import { recorderCommands } from "./commands/recorder.js";
import { recordingCommands } from "./commands/recording.js";
import { replayCommands } from "./commands/replay.js";
import { secretsCommands } from "./commands/secrets.js";
import { signingKeyCommands } from "./commands/signing-key.js";
import { tenantCommands } from "./commands/tenant.js";
import { CliError, usageError } from "./output.js";

/** Every replayctl command (spec/operations.md §replayctl), one table per noun. */
export const commands: readonly Command[] = [
  ...tenantCommands,
  ...memberCommands,
  ...keyCommands,
  ...signingKeyCommands,
  ...secretsCommands,
  ...onCallCommands,
  ...categoryCommands,
  ...recorderCommands,
  ...recordingCommands,
  ...assetCommands,
  ...collectionCommands,
  ...replayCommands,
];

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
    "REPLAYCTL_TOKEN: the system's INTERNAL_TOKEN, needed when its internal port listens beyond loopback.",
    "",
    "The list commands print one page, oldest first (then by id): --page-size 1 to 100, 20 if",
    "omitted. A non-empty nextPageToken in the output is the --page-token of the next page.",
    "key list never shows a key or its hash (a key is shown only by key create).",
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
  // No arguments is a usage error (exit 2), as with any CLI a script might call by mistake.
  if (argv.length === 0) {
    throw usageError("no command; usage: replayctl <noun> <verb> [--flags] (replayctl --help lists the commands)");
  }
  if (argv.some(isHelp) || argv[0] === "help") return { kind: "help" };
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
