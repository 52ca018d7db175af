import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { contractCodeOfCall } from "../lib/rpc/_testing.js";
import { expectProblem } from "./expect.js";
import { provisionTenant, send, sendSigned } from "./http.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";

// Read your writes along the recorder's path, in both run modes: each second call is made the
// moment the first is acknowledged, never retried, many times over. The services learn of each
// other's writes through events, which may lag; a decision that must be current asks the owner
// (docs/architecture.md "Owners' answers"), so none of these depends on how fast events travel.

const ROUNDS = 15;

describe.each(sharedSystems())("read your writes ($mode mode)", (sys) => {
  // Distributed: the recorders' gRPC straight to each service; embedded: the gateway's internal port.
  const servers = sys.serviceUrls?.servers ?? sys.internalUrl;
  const recording = createClient(
    RecordingService,
    createGrpcTransport({ baseUrl: sys.serviceUrls?.replays ?? sys.internalUrl }),
  );

  async function tenant() {
    const t = await provisionTenant(sys, { serverLimit: 100n });
    return {
      ...t,
      async connectedServer() {
        const res = await send(sys.baseUrl, "POST", "/v1/api/servers", {
          headers: t.bearer(),
          body: { name: `ryw-${randomUUID().slice(0, 8)}` },
        });
        expect(res.status, res.text).toBe(201);
        await grpcCheckIn(servers, res.body.serverId);
        return res.body.serverId as string;
      },
      marker: (target: { replayId: string } | { serverId: string }) =>
        send(sys.baseUrl, "POST", "/v1/api/timeline-events", {
          headers: t.bearer(),
          body: { ...target, tick: 1, label: "now" },
        }),
    };
  }

  it("starts a recording on the first try right after the check-in, and pins a marker by server id to it at once", async () => {
    const t = await tenant();
    for (let round = 0; round < ROUNDS; round++) {
      const serverId = await t.connectedServer();
      const { replayId } = await recording.startRecording({ serverId, integration: "rust" });
      const pinned = await t.marker({ serverId });
      expect(pinned.status, pinned.text).toBe(201);
      expect(pinned.body.replayId).toBe(replayId);
      await recording.finishRecording({ replayId, sizeBytes: 1n });
      expectProblem(await t.marker({ serverId }), 404, "NO_ACTIVE_RECORDING");
      // The next recording of the same server, at once: its markers go to it, not to the last one.
      const next = await recording.startRecording({ serverId, integration: "rust" });
      expect((await t.marker({ serverId })).body.replayId).toBe(next.replayId);
      await recording.finishRecording({ replayId: next.replayId, sizeBytes: 1n });
    }
  });

  it("refuses a marker on a replay deleted a moment ago (a 404 stores nothing)", async () => {
    const t = await tenant();
    for (let round = 0; round < ROUNDS; round++) {
      const serverId = await t.connectedServer();
      const { replayId } = await recording.startRecording({ serverId, integration: "rust" });
      await recording.finishRecording({ replayId, sizeBytes: 1n });
      expect((await t.marker({ replayId })).status).toBe(201);
      const del = await sendSigned(sys.baseUrl, t.signer, "DELETE", `/v1/replays/${replayId}`);
      expect(del.status, del.text).toBe(204);
      expectProblem(await t.marker({ replayId }), 404, "REPLAY_NOT_FOUND");
      expectProblem(
        await send(sys.baseUrl, "GET", `/v1/api/replays/${replayId}/timeline-events`, { headers: t.bearer() }),
        404,
        "REPLAY_NOT_FOUND",
      );
    }
  });

  it("refuses a recording on a server deauthorised or purged a moment ago", async () => {
    const t = await tenant();
    for (let round = 0; round < ROUNDS; round++) {
      const deauthorised = await t.connectedServer();
      const purged = await t.connectedServer();
      // Each was known to the replays service as connected: a recording started and finished on it.
      for (const serverId of [deauthorised, purged]) {
        const { replayId } = await recording.startRecording({ serverId, integration: "rust" });
        await recording.finishRecording({ replayId, sizeBytes: 1n });
      }
      const off = await send(sys.baseUrl, "DELETE", `/v1/api/servers/${deauthorised}`, { headers: t.bearer() });
      expect(off.status, off.text).toBe(204);
      expect(await contractCodeOfCall(recording.startRecording({ serverId: deauthorised, integration: "x" }))).toBe(
        "SERVER_DEAUTHORISED",
      );
      const gone = await send(sys.baseUrl, "DELETE", `/v1/api/servers/permanent/${purged}`, { headers: t.bearer() });
      expect(gone.status, gone.text).toBe(204);
      expect(await contractCodeOfCall(recording.startRecording({ serverId: purged, integration: "x" }))).toBe(
        "SERVER_NOT_FOUND",
      );
    }
  });
});
