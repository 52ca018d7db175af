import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { freePorts } from "../free-port.js";
import { provisionTenant, send } from "../http.js";
import { natsServer, natsServerBinary } from "../nats-server.js";
import { pollUntil } from "../poll.js";
import { distributedSkipReason, startDistributedSystem } from "../system.js";

// Seen in the fault soak: a replica restarted while NATS was restarting exited 1 at once ("failed to
// start", CONNECTION_REFUSED), and in Kubernetes would crash-loop through every NATS restart. A
// process now waits for its dependencies at start (lib/startup-wait.ts) and comes up with them.

const binary = natsServerBinary();
const skip = distributedSkipReason() ?? (binary ? undefined : "no nats-server binary to start late");

describe.skipIf(skip)(`a start before NATS is up (distributed mode; ${skip ?? "starts NATS late"})`, () => {
  it("waits for NATS instead of exiting, and serves once it is up", async () => {
    const storeDir = await mkdtemp(join(tmpdir(), "start-before-nats-"));
    const [port] = (await freePorts(1)) as [number];
    const nats = natsServer(binary as string, port, storeDir);
    onTestFinished(async () => {
      await nats.kill();
      await rm(storeDir, { recursive: true, force: true });
    });
    // The five processes start against a NATS that is not there yet: a listener on its port cuts
    // every connection (nats.js: CONNECTION_REFUSED) until each process has said it waits.
    const refuser = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => refuser.listen(port, "127.0.0.1", resolve));
    const names = ["markers", "servers", "replays", "webhooks", "gateway-0"];
    let outputs = () => new Map<string, string>();
    const starting = startDistributedSystem({ natsUrl: nats.url, launched: (read) => (outputs = read) });
    starting.catch(() => {});
    const waiting = (name: string) => outputs().get(name)?.includes("a dependency is unreachable at start; waiting");
    await pollUntil(
      async () => names.filter(waiting).length,
      (n) => n === names.length,
      90_000,
    );
    await new Promise<void>((resolve) => refuser.close(() => resolve()));
    await nats.start();
    const sys = await starting;
    onTestFinished(() => sys.stop().then(() => undefined));
    const t = await provisionTenant(sys);
    const res = await send(sys.baseUrl, "POST", "/v1/api/servers", { headers: t.bearer(), body: { name: "late" } });
    expect(res.status, res.text).toBe(201);
    expect(await sys.stop()).toEqual([0, 0, 0, 0, 0]);
  }, 120_000);
});
