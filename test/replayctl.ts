import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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

/**
 * Runs the compiled replayctl (dist/cli/replayctl.js, as `npx replayctl` runs it) against the
 * internal API at `internalUrl`, with only PATH and `env` besides, and resolves whatever its exit code.
 */
export function runReplayctl(
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
        resolve({ code, stdout, stderr, out: parsed(stdout), problem: parsed(stderr) });
      },
    );
  });
}
