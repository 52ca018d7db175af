import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MarkersService } from "../gen/replay/markers/v1/markers_pb.js";
import { loadConfig } from "./config.js";
import { openPlatform, type Platform } from "./platform.js";
import { startService } from "./service-host.js";
import { DRAIN_MS } from "./worker/worker.js";

// Stopping a service: one deadline for all its steps (operations.md: in-flight work gets up to
// 10 s), so an RPC and a worker round that both hang do not add their drains up.

describe("a started service", () => {
  let dir: string;
  let platform: Platform;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "replay-service-host-"));
    platform = await openPlatform(loadConfig({ DATA_DIR: dir }), "service-host-test");
  }, 60_000);
  afterAll(async () => {
    await platform?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("drains an RPC and a worker round that both hang by one deadline, not one each", async () => {
    let rpcStarted: () => void = () => {};
    const inRpc = new Promise<void>((resolve) => {
      rpcStarted = resolve;
    });
    let roundAborted = false;
    const running = await startService(
      {
        name: "drain_test",
        setup: () => ({
          routes(router) {
            router.service(MarkersService, {
              async createMarker() {
                rpcStarted();
                await new Promise((resolve) => setTimeout(resolve, 30_000).unref());
                return {};
              },
            });
          },
          workers: [
            {
              name: "drain-test:hang",
              intervalMs: 60_000,
              round: (signal) =>
                new Promise<boolean>((resolve) =>
                  signal.addEventListener("abort", () => {
                    roundAborted = true;
                    resolve(false);
                  }),
                ),
            },
          ],
        }),
      },
      loadConfig({ DATA_DIR: dir, PORT: "0" }),
      platform,
    );
    const client = createClient(MarkersService, createConnectTransport({ baseUrl: running.url, httpVersion: "1.1" }));
    const call = client.createMarker({}).catch(() => undefined);
    await inRpc;

    const started = Date.now();
    await running.close(started + 1_000);
    const took = Date.now() - started;
    // Each step with a drain of its own took 1 s for the RPC and DRAIN_MS (10 s) more for the round:
    // the bound is that broken stop, not a guess at how fast a machine is (a busy one takes longer
    // than 1 s, never 10 s longer). The lower bound holds anywhere: the hanging RPC keeps it open.
    expect(took).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(DRAIN_MS);
    expect(roundAborted).toBe(true);
    await call;
  }, 30_000);
});
