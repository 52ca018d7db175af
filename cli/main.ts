// replayctl's run, apart from the process it runs in (cli/run.ts): tests call it in-process.
import { internalTokenHeaders } from "../lib/rpc/internal-token.js";
import { createLeanTransport } from "../lib/rpc/lean-transport.js";
import { createClients } from "./command.js";
import { helpText, parseCommandLine, runCommand } from "./commands.js";
import { type CallContext, failureOf, usageError } from "./output.js";

const DEFAULT_URL = "http://127.0.0.1:8081";
// One unary call per process; a stuck peer must not hold the operator (or a test's 60 s budget).
const CALL_TIMEOUT_MS = 30_000;

function baseUrlOf(raw: string | undefined): string {
  const value = raw === undefined || raw === "" ? DEFAULT_URL : raw;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw usageError(`REPLAYCTL_URL must be an http(s) URL such as ${DEFAULT_URL}, got "${value}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw usageError(`REPLAYCTL_URL must be an http(s) URL such as ${DEFAULT_URL}, got "${value}"`);
  }
  return value;
}

/** Where a run writes: the process's stdout and stderr, or a test's buffers. */
export type CliOutput = { stdout(text: string): void; stderr(text: string): void };

const processOutput: CliOutput = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
};

/** One replayctl run: its exit code; what it prints goes to `output`. */
export async function main(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  output: CliOutput = processOutput,
): Promise<number> {
  const call: CallContext = { command: argv.slice(0, 2).join(" "), baseUrl: env.REPLAYCTL_URL ?? DEFAULT_URL };
  let closeTransport = async () => {};
  try {
    const invocation = parseCommandLine(argv);
    if (invocation.kind === "help") {
      output.stdout(helpText());
      return 0;
    }
    call.command = invocation.name;
    call.baseUrl = baseUrlOf(env.REPLAYCTL_URL);
    const transport = createLeanTransport({
      baseUrl: call.baseUrl,
      defaultTimeoutMs: CALL_TIMEOUT_MS,
      // REPLAYCTL_TOKEN: the system's INTERNAL_TOKEN, which it requires when it listens beyond loopback.
      headers: internalTokenHeaders(env.REPLAYCTL_TOKEN || undefined),
    });
    // The keep-alive connection must not hold the process open once the answer is read.
    closeTransport = () => transport.close();
    const answer = await runCommand(invocation, createClients(transport));
    output.stdout(`${JSON.stringify(answer)}\n`);
    return 0;
  } catch (err) {
    const { problem, exitCode } = failureOf(err, call);
    output.stderr(`${JSON.stringify(problem)}\n`);
    return exitCode;
  } finally {
    await closeTransport();
  }
}
