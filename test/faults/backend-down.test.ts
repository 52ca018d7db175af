import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { createReplayClient } from "@replay/client";
import { describe, expect, it, onTestFinished } from "vitest";
import { RPC_TIMEOUT_MS } from "../../gateway/guard.js";
import {
  RecordingService,
  type UploadArchiveRequest,
  UploadArchiveRequestSchema,
} from "../../gen/replay/replays/v1/recording_pb.js";
import { PEER_TIMEOUT_MS } from "../../lib/rpc/peers.js";
import { provisionTenant, send } from "../http.js";
import { pollUntil } from "../poll.js";
import { recordingOnNewServer } from "../recorder.js";
import { distributedSkipReason, startDistributedSystem } from "../system.js";
import { useSystem } from "../use-system.js";

/** The replays service's RecordingService, called straight on its own port as recorders do. */
const recording = (sys: { serviceUrls: Record<string, string> | undefined }) =>
  createClient(RecordingService, createGrpcTransport({ baseUrl: sys.serviceUrls?.replays as string }));

// decisions.md §1: a backend service that cannot be reached -> 503 SERVICE_UNAVAILABLE within the
// request deadline, with no internal detail; operations.md: /readyz reports it, /healthz does not.
describe.skipIf(distributedSkipReason())(
  "a backend service that is down (distributed mode; skipped without DATABASE_URL and NATS_URL: it kills one process of five)",
  () => {
    const system = useSystem(() => startDistributedSystem());

    it("answers 503 SERVICE_UNAVAILABLE at once, reports not ready, and keeps serving what does not need it", async () => {
      const sys = system();
      const t = await provisionTenant(sys);
      expect((await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() })).status).toBe(200);
      await sys.kill("servers");

      const startedAt = performance.now();
      const res = await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() });
      const elapsedMs = performance.now() - startedAt;
      expect(res.status, res.text).toBe(503);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 503, code: "SERVICE_UNAVAILABLE" });
      expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|servers\.v1|stack/i);
      // A refused connection is known at once; the 10 s deadline is only for a backend that hangs.
      // The answer carries nothing that tells the two apart (both are this 503), so the bound is
      // the deadline a gateway that waited would hit, less a second: a busy machine answers a
      // refused connection in seconds, never in 9.
      expect(elapsedMs).toBeLessThan(RPC_TIMEOUT_MS - 1_000);

      // The readiness answer is shared for a second (gateway/main.ts), so it turns within one.
      const ready = await pollUntil(
        () => send(sys.baseUrl, "GET", "/readyz"),
        (res) => res.status !== 200,
        30_000,
      );
      expect(ready.status).toBe(503);
      // The operator sees which dependency it is, and nothing of where it is.
      expect(ready.body).toMatchObject({ code: "SERVICE_UNAVAILABLE", detail: "not ready: servers service" });
      expect((await send(sys.baseUrl, "GET", "/healthz")).status).toBe(200);
      // Authentication does not depend on the servers service.
      expect((await send(sys.baseUrl, "GET", "/v1/api/servers")).body?.code).toBe("UNAUTHENTICATED");
      expect((await send(sys.baseUrl, "GET", "/v1/api/replays", { headers: t.bearer() })).status).toBe(200);
    });

    // Seen in the fault soak: an upload through the gateway's internal port whose replays replica died
    // mid-stream ended CANCELLED ("http2 stream closed"), which a recorder takes for its own cancel.
    it("answers UNAVAILABLE, not CANCELLED, to an upload through the gateway whose backend dies mid-stream", async () => {
      const sys = system();
      await sys.restart("servers");
      const t = await provisionTenant(sys);
      const { replayId } = await recordingOnNewServer(sys, t.bearer(), "dies-mid-upload");
      const client = new grpc.Client(new URL(sys.internalUrl).host, grpc.credentials.createInsecure());
      onTestFinished(() => client.close());
      const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
        const call = client.makeClientStreamRequest(
          `/${RecordingService.typeName}/UploadArchive`,
          (message: UploadArchiveRequest) => Buffer.from(toBinary(UploadArchiveRequestSchema, message)),
          (bytes: Buffer) => bytes,
          (err) => resolve(err ?? undefined),
        );
        call.write(create(UploadArchiveRequestSchema, { replayId, chunk: randomBytes(65_536) }));
      });
      const tmp = join(sys.blobDir, ".tmp");
      await pollUntil(
        () =>
          readdir(tmp).then(
            (names) => names.some((n) => n.endsWith(".part")),
            () => false,
          ),
        (mid) => mid,
        15_000,
      );
      await sys.kill("replays");
      const err = await ended;
      expect(err?.code, String(err)).toBe(grpc.status.UNAVAILABLE);
      await sys.restart("replays");
    });

    // A marker create and a recording start ask the owner of their target (replays, servers) at the
    // time of the request: an owner down or stalled is a 503 with Retry-After within the lookup's
    // deadline (PEER_TIMEOUT_MS), never a 500 and never a marker stored.
    it("answers 503 with Retry-After, storing nothing, while the owner a request must ask is down or stalled", async () => {
      const sys = system();
      const t = await provisionTenant(sys);
      const { serverId, replayId } = await recordingOnNewServer(sys, t.bearer(), "owner-down");
      const marker = () =>
        send(sys.baseUrl, "POST", "/v1/api/timeline-events", {
          headers: t.bearer(),
          body: { replayId, tick: 1, label: "while its owner is away" },
        });
      const refused = async (why: string) => {
        const startedAt = performance.now();
        const res = await marker();
        expect(res.status, `${why}: ${res.text}`).toBe(503);
        expect(res.body).toMatchObject({ status: 503, code: "SERVICE_UNAVAILABLE" });
        expect(res.headers.get("retry-after")).toBe("1");
        expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|replays\.v1|stack/i);
        return performance.now() - startedAt;
      };
      await sys.kill("replays");
      // Refused at once; the deadline is for an owner that hangs (as the gateway's own, above).
      expect(await refused("replays down")).toBeLessThan(RPC_TIMEOUT_MS - 1_000);
      await sys.restart("replays");
      expect((await marker()).status).toBe(201);

      sys.stall("replays", true);
      try {
        // Held to the lookup's deadline, not the gateway's 10 s: the answer comes when it passes.
        const ms = await refused("replays stalled");
        expect(ms).toBeGreaterThanOrEqual(PEER_TIMEOUT_MS - 50);
        expect(ms).toBeLessThan(RPC_TIMEOUT_MS);
      } finally {
        sys.stall("replays", false);
      }
      const listed = await send(sys.baseUrl, "GET", `/v1/api/replays/${replayId}/timeline-events`, {
        headers: t.bearer(),
      });
      expect(listed.body.timelineEvents, listed.text).toHaveLength(1);

      // StartRecording asks the servers service (the replays service's internal gRPC, as recorders call it).
      await recording(sys).finishRecording({ replayId, sizeBytes: 1n });
      await sys.kill("servers");
      const started = await recording(sys)
        .startRecording({ serverId, integration: "x" })
        .then(
          () => "OK",
          (err: unknown) => ConnectError.from(err),
        );
      expect(started instanceof ConnectError && started.code, String(started)).toBe(Code.Unavailable);
      await sys.restart("servers");
      expect((await recording(sys).startRecording({ serverId, integration: "x" })).replayId).toMatch(/^[0-9a-f-]{36}$/);
    });

    // The client package retries what is safe through a restart, and nothing else.
    it("lets @replay/client retry a GET through the service's restart, and sends a POST once", async () => {
      const sys = system();
      const t = await provisionTenant(sys);
      await sys.kill("servers");
      const sent: number[] = [];
      const client = createReplayClient({
        baseUrl: sys.baseUrl,
        apiKey: t.key,
        // Waits of 1 s (the gateway's Retry-After), then 2, 4, 8, 16, 30, 30 s: two minutes for the
        // restart on a busy machine.
        retry: { maxAttempts: 8, baseDelayMs: 1_000 },
        fetch: async (request, init) => {
          const res = await fetch(request, init);
          sent.push(res.status);
          return res;
        },
      });

      const once = await client.POST("/v1/api/servers", { body: { name: "sent once" } });
      expect(once.response.status).toBe(503);
      expect(once.error?.code).toBe("SERVICE_UNAVAILABLE");
      expect(sent).toEqual([503]);

      sent.length = 0;
      const listed = client.GET("/v1/api/servers");
      // The service comes back once the client has met the 503, while it waits to try again.
      await pollUntil(
        async () => sent.length,
        (n) => n > 0,
        30_000,
      );
      const restarted = sys.restart("servers");
      const { data, response } = await listed;
      await restarted;
      expect(response.status).toBe(200);
      expect(data?.servers).toEqual([]);
      expect(sent[0]).toBe(503);
      expect(sent.at(-1)).toBe(200);
    });
  },
);
