#!/usr/bin/env node
import { createConnectTransport } from "@connectrpc/connect-node";
import { internalTokenInterceptor } from "../lib/rpc/internal-token.js";
import { keepByteOrderMarks } from "../lib/rpc/text-encoding.js";
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

async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const call: CallContext = { command: argv.slice(0, 2).join(" "), baseUrl: env.REPLAYCTL_URL ?? DEFAULT_URL };
  try {
    const invocation = parseCommandLine(argv);
    if (invocation.kind === "help") {
      process.stdout.write(helpText());
      return 0;
    }
    call.command = invocation.name;
    call.baseUrl = baseUrlOf(env.REPLAYCTL_URL);
    keepByteOrderMarks();
    // The one HTTP/2 session must not hold the process open once the call is done. connect-node
    // unrefs an idle session and its timers, so the event loop empties as soon as the answer is
    // read. Aborting the session explicitly instead can make node's http2 raise an unhandled
    // 'error' when the peer broke the protocol (for example a plain HTTP/1 server on the port).
    const transport = createConnectTransport({
      baseUrl: call.baseUrl,
      httpVersion: "2",
      idleConnectionTimeoutMs: 1_000,
      defaultTimeoutMs: CALL_TIMEOUT_MS,
      // REPLAYCTL_TOKEN: the system's INTERNAL_TOKEN, which it requires when it listens beyond loopback.
      interceptors: env.REPLAYCTL_TOKEN ? [internalTokenInterceptor(env.REPLAYCTL_TOKEN)] : [],
    });
    const output = await runCommand(invocation, createClients(transport));
    process.stdout.write(`${JSON.stringify(output)}\n`);
    return 0;
  } catch (err) {
    const { problem, exitCode } = failureOf(err, call);
    process.stderr.write(`${JSON.stringify(problem)}\n`);
    return exitCode;
  }
}

// No process.exit: it could cut off output still being written to a pipe.
process.exitCode = await main(process.argv.slice(2), process.env);
