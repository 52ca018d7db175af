// INTERNAL_TOKEN as docs/configuration.md has it: a process whose internal listeners leave loopback
// without a token refuses to start (a process's exit code and stderr), and with one every internal
// listener refuses a caller without it. The second is the same code in both run modes (lib/rpc/server.ts's
// guard, the gateway's and the services' clients), so the five parts run in this process for it.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import { ServerStatus } from "../gen/replay/servers/v1/servers_pb.js";
import type { ServiceName } from "../lib/config.js";
import { freeServicePorts } from "./free-port.js";
import { provisionTenant, send } from "./http.js";
import { type InProcessSystem, startInProcess } from "./in-process.js";
import { grpcCheckIn } from "./recorder.js";
import { runReplayctl } from "./replayctl.js";
import { adminClient } from "./system.js";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
const TOKEN = randomBytes(32).toString("hex");

/** Starts `node dist/start.js [name]` and resolves to its exit code and stderr once it exits. */
function startAndWaitExit(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, "dist", "start.js"), ...args], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe("INTERNAL_TOKEN: the internal port beyond loopback", () => {
  it("refuses to start, before opening any data, when INTERNAL_HOST leaves loopback without a token", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "replay-token-"));
    try {
      // Side by side: each refuses once its modules are loaded, before any data or connection.
      const [embedded, service] = await Promise.all([
        startAndWaitExit([], { INTERNAL_HOST: "0.0.0.0", DATA_DIR: dataDir }),
        startAndWaitExit(["servers"], {
          INTERNAL_HOST: "0.0.0.0",
          DATABASE_URL: "postgres://127.0.0.1:1/none",
          NATS_URL: "nats://127.0.0.1:1",
        }),
      ]);
      expect(embedded.code).toBe(1);
      expect(embedded.stderr).toMatch(/INTERNAL_TOKEN \(or INTERNAL_TOKEN_FILE\) must be set when INTERNAL_HOST/);
      expect(existsSync(join(dataDir, "pg"))).toBe(false);
      expect(service.code).toBe(1);
      expect(service.stderr).toMatch(/INTERNAL_TOKEN/);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  describe("INTERNAL_HOST 0.0.0.0 with a token: the admin API and every service", () => {
    let sys: InProcessSystem;
    /** Each service's own port (MARKERS_PORT, ...), where a caller reaches it without the gateway. */
    let serviceUrls: Record<ServiceName, string>;
    beforeAll(async () => {
      const services = await freeServicePorts();
      serviceUrls = services.urls;
      sys = await startInProcess({ INTERNAL_HOST: "0.0.0.0", INTERNAL_TOKEN: TOKEN, ...services.env });
    }, 120_000);
    afterAll(async () => {
      await sys?.close();
    }, 30_000);
    /** A tenant made through the admin API with the token. */
    const tenant = () => provisionTenant({ admin: adminClient(sys.internalUrl, TOKEN) });

    it("replayctl needs REPLAYCTL_TOKEN: without it UNAUTHENTICATED, with it the call is served", async () => {
      const without = await runReplayctl(sys.internalUrl, ["tenant", "create", "--name", "x"]);
      expect(without.code).toBe(1);
      expect(without.problem).toMatchObject({ status: 401, code: "UNAUTHENTICATED" });
      const wrong = await runReplayctl(sys.internalUrl, ["tenant", "create"], {
        REPLAYCTL_TOKEN: `${TOKEN.slice(0, -1)}${TOKEN.endsWith("0") ? "1" : "0"}`,
      });
      expect(wrong.problem).toMatchObject({ code: "UNAUTHENTICATED" });
      const right = await runReplayctl(sys.internalUrl, ["tenant", "create"], { REPLAYCTL_TOKEN: TOKEN });
      expect(right.code).toBe(0);
      expect(right.out.tenantId).toMatch(/^[0-9a-f-]{36}$/);
    });

    it("GET /metrics needs the token too (Prometheus sends it as a bearer token)", async () => {
      expect((await send(sys.internalUrl, "GET", "/metrics")).status).toBe(401);
      const scraped = await send(sys.internalUrl, "GET", "/metrics", {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(scraped.status).toBe(200);
      expect(scraped.text).toContain("replay_outbox_backlog");
    });

    // Through the gateway's internal port (as recorders call it) and straight to the servers service's own
    // port (the gateway itself reaches the services with the token, so the public API is unchanged).
    it.each([
      { to: "the gateway internal port", url: () => sys.internalUrl },
      { to: "the servers service port", url: () => serviceUrls.servers },
    ])("a stock gRPC check-in to $to without the token is UNAUTHENTICATED, with it served", async ({ url }) => {
      const t = await tenant();
      const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: "tokened" },
      });
      expect(created.status).toBe(201);
      const serverId = created.body.serverId as string;
      await expect(grpcCheckIn(url(), serverId)).rejects.toMatchObject({ code: 16 });
      expect((await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() })).body).toEqual({
        servers: [],
      });
      expect((await grpcCheckIn(url(), serverId, { token: TOKEN })).status).toBe(ServerStatus.ONLINE);
      const list = await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() });
      expect(list.body.servers.map((s: { id: string }) => s.id)).toEqual([serverId]);
    });

    it("grpc.health.v1 answers without the token, for Kubernetes probes", async () => {
      for (const url of Object.values(serviceUrls)) {
        const health = createClient(Health, createGrpcTransport({ baseUrl: url }));
        expect((await health.check({ service: "" })).status).toBe(1);
      }
    });
  });
});
