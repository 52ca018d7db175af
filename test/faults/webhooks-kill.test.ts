import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, inject, it, onTestFinished } from "vitest";
import { AssetState, RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { freePorts } from "../free-port.js";
import { provisionTenant, send, sendSigned } from "../http.js";
import { natsServer, natsServerBinary } from "../nats-server.js";
import { pollUntil } from "../poll.js";
import { grpcCheckIn } from "../recorder.js";
import { distributedSkipReason, startDistributedSystem } from "../system.js";
import { startWebhookReceiver } from "../webhook-receiver.js";

// At least once: the webhooks service (consumer and delivery worker) and the NATS server
// are SIGKILLed and restarted while replays emit events that fan out to three subscriptions; every
// event still reaches every subscription's receiver.

const binary = natsServerBinary();
const skip = distributedSkipReason() ?? (binary ? undefined : "no nats-server binary to crash");

describe.skipIf(skip)(`webhook deliveries across crashes (distributed mode; ${skip ?? "kills processes"})`, () => {
  it("delivers every event to every subscription while the webhooks service and NATS are SIGKILLed mid fan-out", async () => {
    const storeDir = await mkdtemp(join(tmpdir(), "webhooks-fault-nats-"));
    const [natsPort, receiverPort] = (await freePorts(2)) as [number, number];
    const nats = natsServer(binary as string, natsPort, storeDir);
    onTestFinished(async () => {
      await nats.kill();
      await rm(storeDir, { recursive: true, force: true });
    });
    await nats.start();
    const { certDir } = inject("webhookReceiver");
    const receiver = await startWebhookReceiver({ port: receiverPort, certDir });
    onTestFinished(() => receiver.close());
    const sys = await startDistributedSystem({
      natsUrl: nats.url,
      env: {
        WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${receiverPort}`,
        WEBHOOK_CA_FILE: join(certDir, "cert.pem"),
        WEBHOOK_RETRY_SCHEDULE: "0,200ms,500ms,1s,2s,4s",
        // A killed worker's leases run out 10 s after the timeout.
        WEBHOOK_TIMEOUT_MS: "2000",
      },
    });
    onTestFinished(() => sys.stop().then(() => undefined));
    const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));

    const t = await provisionTenant(sys, { rateLimitRps: 5000, rateLimitBurst: 5000, serverLimit: 100n });
    const paths = [receiver.newPath(), receiver.newPath(), receiver.newPath()];
    for (const path of paths) {
      const res = await sendSigned(sys.baseUrl, t.signer, "POST", "/v1/webhooks", {
        body: {
          url: receiver.url(path),
          events: ["collection.finalized", "asset.processing", "asset.ready", "collection.released"],
        },
      });
      expect(res.status, res.text).toBe(201);
    }
    // Recordings start while everything is up (starting one needs the servers projection, fed by NATS).
    const replayIds: string[] = [];
    for (let i = 0; i < 12; i++) {
      const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: `srv-${i}` },
      });
      const serverId: string = created.body.serverId;
      await grpcCheckIn(sys.internalUrl, serverId);
      const started = await pollUntil(
        () => recording.startRecording({ serverId }).catch((err) => ConnectError.from(err)),
        (r) => !(r instanceof ConnectError),
        15_000,
      );
      replayIds.push((started as { replayId: string }).replayId);
    }

    // The transitions, one event each, come before the faults, while each fault lasts, and after:
    // by construction, not by sleeping for a guess at how long a kill or a restart takes.
    const expected: string[] = [];
    const transitions = async (ids: string[]) => {
      for (const replayId of ids) {
        await recording.finishRecording({ replayId, sizeBytes: 10n, formatVersion: 1 });
        expected.push(`collection.finalized ${replayId}`);
        await recording.setAssetState({ replayId, state: AssetState.PROCESSING });
        expected.push(`asset.processing ${replayId}`);
        await recording.setAssetState({ replayId, state: AssetState.READY });
        expected.push(`asset.ready ${replayId}`);
        await recording.releaseCollection({ replayId });
        expected.push(`collection.released ${replayId}`);
      }
    };
    // The webhooks service dies once deliveries have begun, while the first replays' events still come.
    const first = transitions(replayIds.slice(0, 3));
    await pollUntil(
      async () => receiver.requests(paths[0] as string).length,
      (n) => n >= 4,
      30_000,
    );
    await sys.kill("webhooks");
    await first;
    // Events while it is dead: its consumer must pick them up after the restart.
    await transitions(replayIds.slice(3, 6));
    await sys.restart("webhooks");
    await nats.kill();
    // Events while NATS is down: the outbox keeps them until it is back.
    await transitions(replayIds.slice(6, 9));
    await nats.start();
    await transitions(replayIds.slice(9));
    expect(expected).toHaveLength(48);

    const received = (path: string) =>
      [
        ...new Set(
          receiver.requests(path).map((r) => {
            const body = r.json as { event: string; data: Record<string, { replay_id: string }> };
            return `${body.event} ${Object.values(body.data)[0]?.replay_id}`;
          }),
        ),
      ].sort();
    for (const path of paths) {
      await pollUntil(
        async () => received(path).length,
        (n) => n >= expected.length,
        60_000,
      ).catch(() => undefined);
      expect(received(path), sys.output().slice(-3000)).toEqual([...expected].sort());
    }
  }, 180_000);
});
