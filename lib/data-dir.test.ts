// A service process on a read-only root filesystem (a container as deploy/k8s runs it) without the
// variables that keep it out of DATA_DIR: one line naming each variable, exit 1, no stack trace.
// The read-only root is stood in for by a DATA_DIR under a regular file, which no one (root
// included, as in CI) can create; the Postgres and NATS addresses are never reached.
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");

async function startFails(name: string, env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [join(root, "dist", "start.js"), name], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: "postgres://postgres@127.0.0.1:1/unreached",
      NATS_URL: "nats://127.0.0.1:1",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // On code that does not check, the process waits for the unreachable Postgres: ended with the test.
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const err: string[] = [];
  child.stderr.on("data", (chunk: Buffer) => err.push(chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, stderr: err.join("") };
}

/** A DATA_DIR that cannot be created: its parent is a file. */
async function unwritableDataDir(): Promise<{ dataDir: string; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), "replay-readonly-"));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, "file"), "");
  return { dataDir: join(dir, "file", ".data"), dir };
}

describe("a service process whose DATA_DIR cannot be written", () => {
  it("replays without PAGE_TOKEN_KEY and BLOB_URL: one line each, naming the variable, exit 1", async () => {
    const { dataDir } = await unwritableDataDir();
    const { code, stderr } = await startFails("replays", { DATA_DIR: dataDir });
    expect(code).toBe(1);
    expect(stderr).not.toMatch(/\n\s+at /);
    const lines = stderr.trim().split("\n");
    expect(lines).toEqual([
      "invalid configuration:",
      expect.stringMatching(
        /^ {2}- PAGE_TOKEN_KEY \(or PAGE_TOKEN_KEY_FILE\) must be set: .* cannot be created or written \(ENOTDIR\)$/,
      ),
      expect.stringMatching(
        /^ {2}- BLOB_URL must be set: .*\/file\/\.data\/blobs" cannot be created or written \(ENOTDIR\)$/,
      ),
    ]);
  });

  it("webhooks without PAGE_TOKEN_KEY: one line naming it, exit 1", async () => {
    const { dataDir } = await unwritableDataDir();
    const { code, stderr } = await startFails("webhooks", {
      DATA_DIR: dataDir,
      SECRETS_KEY: Buffer.alloc(32, 7).toString("base64"),
    });
    expect(code).toBe(1);
    expect(stderr.trim().split("\n")).toEqual([
      "invalid configuration:",
      expect.stringMatching(/^ {2}- PAGE_TOKEN_KEY \(or PAGE_TOKEN_KEY_FILE\) must be set: without it webhooks keeps/),
    ]);
  });

  it("replays with the key given and BLOB_URL on a directory it cannot create: names BLOB_URL only", async () => {
    const { dataDir, dir } = await unwritableDataDir();
    const blobUrl = pathToFileURL(join(dir, "file", "blobs")).href;
    const { code, stderr } = await startFails("replays", {
      DATA_DIR: dataDir,
      PAGE_TOKEN_KEY: Buffer.alloc(32, 7).toString("base64"),
      BLOB_URL: blobUrl,
    });
    expect(code).toBe(1);
    expect(stderr.trim().split("\n")).toEqual([
      "invalid configuration:",
      `  - BLOB_URL "${blobUrl}" cannot be created or written (ENOTDIR)`,
    ]);
  });
});
