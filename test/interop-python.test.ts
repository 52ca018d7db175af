// Python's gRPC (C-core, Debian's python3-grpcio) against one running system (the gRPC
// servers are the same code in both modes), as an outside integrator calls it: code built from proto/ alone (`buf build proto`, read by
// test/interop/python/protos.py) and what docs/grpc-clients.md says. Each Python test is a test here.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { provisionTenant } from "./http.js";
import { oneSharedSystem } from "./shared-system.js";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
const suiteDir = join(root, "test", "interop", "python");
/** Debian's interpreter, where python3-grpcio and python3-protobuf are installed (.ci/run), whatever python3 PATH finds. */
const PYTHON = "/usr/bin/python3";
const SUITE_TIMEOUT_MS = 240_000;

/** The suite's tests, in the order the file defines them. */
const names = [
  ...readFileSync(join(suiteDir, "test_interop.py"), "utf8").matchAll(/^ {4}def (test_\w+)\(self\)/gm),
].map((m) => m[1] as string);

type Outcome = { test: string; outcome: "passed" | "failed"; seconds: number; message: string };

const hostPort = (url: string) => new URL(url).host;

let descriptorDir: string;
let descriptorSet: string;
beforeAll(async () => {
  // What a client generates its code from: proto/ and nothing else (buf and protoc bring google/protobuf).
  descriptorDir = await mkdtemp(join(tmpdir(), "replay-interop-"));
  descriptorSet = join(descriptorDir, "proto.binpb");
  await promisify(execFile)(join(root, "node_modules", ".bin", "buf"), ["build", "proto", "-o", descriptorSet], {
    cwd: root,
  });
});
afterAll(() => rm(descriptorDir, { recursive: true, force: true }));

describe.each(oneSharedSystem())("Python gRPC (C-core) against the $mode system", (sys) => {
  const outcomes = new Map<string, Outcome>();
  let output = "";
  beforeAll(async () => {
    const tenant = await provisionTenant(sys, { serverLimit: 500n });
    const env = {
      PATH: process.env.PATH ?? "",
      PYTHONDONTWRITEBYTECODE: "1",
      REPLAY_DESCRIPTOR_SET: descriptorSet,
      REPLAY_INTEROP: JSON.stringify({
        public_url: sys.baseUrl,
        api_key: tenant.key,
        gateway_internal: hostPort(sys.internalUrl),
        services: Object.fromEntries(Object.entries(sys.ownServiceUrls).map(([name, url]) => [name, hostPort(url)])),
        blob_dir: sys.blobDir,
      }),
    };
    const result = await promisify(execFile)(PYTHON, ["run.py"], {
      cwd: suiteDir,
      env,
      timeout: SUITE_TIMEOUT_MS,
      maxBuffer: 16 * 2 ** 20,
    }).catch((err: { stdout?: string; stderr?: string; message: string }) => ({
      stdout: err.stdout ?? "",
      stderr: `${err.stderr ?? ""}\n${err.message}`,
    }));
    output = result.stderr;
    for (const line of result.stdout.split("\n")) {
      if (!line.startsWith("{")) continue;
      const outcome = JSON.parse(line) as Outcome;
      outcomes.set(outcome.test, outcome);
    }
  }, SUITE_TIMEOUT_MS + 30_000);

  for (const name of names) {
    it(name, () => {
      const outcome = outcomes.get(name);
      expect(outcome, `no outcome for ${name}; the suite printed:\n${output}`).toBeDefined();
      expect(outcome?.outcome, outcome?.message).toBe("passed");
    });
  }
});
