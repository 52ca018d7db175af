import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { main } from "../cli/main.js";

const cli = join(
  fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/"),
  "dist",
  "cli",
  "replayctl.js",
);

/** What one replayctl run printed: its exit code, stdout and stderr as text, and each parsed when JSON. */
export type CliRun = { code: number; stdout: string; stderr: string; out: any; problem: any };

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function cliRun(code: number, stdout: string, stderr: string): CliRun {
  return { code, stdout, stderr, out: parsed(stdout), problem: parsed(stderr) };
}

/**
 * Runs replayctl (cli/main.ts, what the binary runs) in this process against the internal API at
 * `internalUrl`, with only `env` besides: a process start per call cost each test a second on this
 * machine. spawnReplayctl runs the compiled binary itself.
 */
export async function runReplayctl(
  internalUrl: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const code = await main(
    args,
    { REPLAYCTL_URL: internalUrl, ...env },
    { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) },
  );
  return cliRun(code, stdout, stderr);
}

/**
 * Runs the built replayctl (dist/cli/replayctl.js, the bin, as `npx replayctl` runs it; it loads the bundle) with only PATH
 * and `env` besides, and resolves whatever its exit code.
 */
export function spawnReplayctl(
  internalUrl: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [cli, ...args],
      { env: { PATH: process.env.PATH ?? "", REPLAYCTL_URL: internalUrl, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : undefined) : 0;
        if (code === undefined) return reject(err);
        resolve(cliRun(code, stdout, stderr));
      },
    );
  });
}
