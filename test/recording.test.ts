import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../gen/replay/common/v1/common_pb.js";
import { AssetState, RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../gen/replay/replays/v1/replays_pb.js";
import { decodeEvent, type EventSubject } from "../lib/bus/events.js";
import { trustedHeaders } from "../lib/rpc/context.js";
import { provisionTenant, type Signer, send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn, grpcUploadArchive, rawUploadArchive } from "./recorder.js";
import { runReplayctl } from "./replayctl.js";
import { sharedSystems } from "./shared-system.js";

// The recording lifecycle (decisions.md §7) over the internal API (gRPC, through the gateway's
// internal port, as recorder infrastructure and replayctl reach it), in both run modes. State is
// read back through what the lifecycle allows next, the servers list's replayCount and, in the
// distributed mode, the replays schema's own rows and outbox.

/** One event of each subject, as a replay taken through every step of its lifecycle enqueues. */
const oneOfEach = Object.fromEntries(
  [
    "replays.recording.started",
    "replays.recording.finished",
    "replays.collection.finalized",
    "replays.asset.processing",
    "replays.asset.ready",
    "replays.collection.released",
    "replays.collection.revoked",
    "replays.asset.expired",
  ].map((subject) => [subject, 1]),
);

/** The contract code of a refused call, or "OK". */
async function codeOf(call: Promise<unknown>): Promise<string> {
  try {
    await call;
    return "OK";
  } catch (err) {
    const [detail] = ConnectError.from(err).findDetails(ErrorDetailSchema);
    return detail?.code ?? `no code: ${String(err)}`;
  }
}

describe.each(sharedSystems())("recording lifecycle ($mode mode)", (sys) => {
  const rpc = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));

  async function query<R>(sql: string, params: unknown[]): Promise<R[]> {
    const client = new pg.Client({ connectionString: sys.databaseUrl });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as R[];
    } finally {
      await client.end();
    }
  }

  async function tenant(plan: Parameters<typeof provisionTenant>[1] = {}) {
    const t = await provisionTenant(sys, plan);
    const post = (path: string, body: unknown) => send(sys.baseUrl, "POST", path, { headers: t.bearer(), body });
    async function pending(): Promise<string> {
      const res = await post("/v1/api/servers", { name: `srv-${randomUUID().slice(0, 8)}` });
      expect(res.status, res.text).toBe(201);
      return res.body.serverId;
    }
    /** A server that connected, once the replays service has seen it connect (a first recording started). */
    async function recordingServer(): Promise<{ serverId: string; replayId: string }> {
      const serverId = await pending();
      await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
      const res = await pollUntil(
        () => rpc.startRecording({ serverId, integration: "rust" }).catch((err) => ConnectError.from(err)),
        (r) => !(r instanceof ConnectError),
        10_000,
      );
      return { serverId, replayId: (res as { replayId: string }).replayId };
    }
    async function replayCount(serverId: string): Promise<number> {
      const res = await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() });
      return res.body.servers.find((s: { id: string }) => s.id === serverId)?.replayCount;
    }
    return { ...t, pending, recordingServer, replayCount };
  }

  /** Events the replays service enqueued for one replay, by subject (distributed mode only). */
  async function eventsOf(replayId: string): Promise<Record<string, number>> {
    const rows = await query<{ subject: string; n: number }>(
      `SELECT subject, count(*)::int AS n FROM replays.outbox
        WHERE position(convert_to($1, 'UTF8') in payload) > 0 GROUP BY subject`,
      [replayId],
    );
    return Object.fromEntries(rows.map((r) => [r.subject, r.n]));
  }

  it("drives a replay through its whole lifecycle, each step once", async () => {
    const t = await tenant();
    const { serverId, replayId } = await t.recordingServer();
    expect(replayId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await codeOf(rpc.startRecording({ serverId }))).toBe("RECORDING_IN_PROGRESS");
    await pollUntil(
      () => t.replayCount(serverId),
      (n) => n === 1,
      10_000,
    );

    expect(await codeOf(rpc.releaseCollection({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.expireReplay({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.finishRecording({ replayId, sizeBytes: 1234n }))).toBe("OK");
    expect(await codeOf(rpc.finishRecording({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.setAssetState({ replayId, state: AssetState.READY }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.setAssetState({ replayId, state: AssetState.UNSPECIFIED }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.setAssetState({ replayId, state: AssetState.PROCESSING }))).toBe("OK");
    expect(await codeOf(rpc.setAssetState({ replayId, state: AssetState.PROCESSING }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.releaseCollection({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.setAssetState({ replayId, state: AssetState.READY }))).toBe("OK");
    expect(await codeOf(rpc.setAssetState({ replayId, state: AssetState.FAILED }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.releaseCollection({ replayId }))).toBe("OK");
    expect(await codeOf(rpc.releaseCollection({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.revokeCollection({ replayId }))).toBe("OK");
    expect(await codeOf(rpc.revokeCollection({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.releaseCollection({ replayId }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.expireReplay({ replayId }))).toBe("OK");
    expect(await codeOf(rpc.expireReplay({ replayId }))).toBe("INVALID_TRANSITION");
    // The server records again once its recording finished.
    expect(await codeOf(rpc.startRecording({ serverId }))).toBe("OK");
    await pollUntil(
      () => t.replayCount(serverId),
      (n) => n === 2,
      10_000,
    );

    if (sys.mode !== "distributed") return;
    const [row] = await query<Record<string, unknown>>(
      `SELECT status, pipeline, visibility, revoked, storage_tier, archive_key, size_bytes::int AS size_bytes,
              integration, quality, duration_ms IS NOT NULL AS has_duration, format_version,
              retention_until > started_at AS retained
         FROM replays.replay WHERE replay_id = $1`,
      [replayId],
    );
    expect(row).toEqual({
      status: "expired",
      pipeline: "ended",
      visibility: "staff",
      revoked: true,
      storage_tier: "hot",
      archive_key: null,
      size_bytes: 1234,
      integration: "rust",
      quality: "standard",
      has_duration: true,
      format_version: 1,
      retained: true,
    });
    expect(await eventsOf(replayId)).toEqual(oneOfEach);
    const [usage] = await query<{ used: number }>(
      "SELECT storage_used_bytes::int AS used FROM replays.tenant WHERE tenant_id = $1",
      [t.tenantId],
    );
    expect(usage?.used).toBe(0);
    // The webhook-facing payloads carry the collection and the asset as they became.
    const payloadOf = async <S extends EventSubject>(subject: S) => {
      const [event] = await query<{ payload: Buffer }>(
        "SELECT payload FROM replays.outbox WHERE subject = $1 AND position(convert_to($2, 'UTF8') in payload) > 0",
        [subject, replayId],
      );
      return decodeEvent(subject, new Uint8Array(event?.payload ?? []));
    };
    const finalized = await payloadOf("replays.collection.finalized");
    expect(finalized.tenantId).toBe(t.tenantId);
    expect(finalized.collection).toMatchObject({
      id: replayId,
      replayId,
      serverId,
      state: "finalized",
      status: "processing",
      visibility: "staff",
      sizeBytes: 1234n,
      formatVersion: 1,
      integration: "rust",
    });
    const revoked = await payloadOf("replays.collection.revoked");
    expect(revoked.collection).toMatchObject({ state: "revoked", status: "ready", visibility: "staff", revoked: true });
    const expired = await payloadOf("replays.asset.expired");
    expect(expired.asset).toMatchObject({ id: replayId, state: "expired", status: "expired", sizeBytes: 1234n });
  });

  it("refuses malformed, unknown, pending, deauthorised and purged servers with their codes", async () => {
    const t = await tenant();
    expect(await codeOf(rpc.startRecording({ serverId: "not-a-uuid" }))).toBe("INVALID_SERVER_ID");
    expect(await codeOf(rpc.startRecording({ serverId: randomUUID() }))).toBe("SERVER_NOT_FOUND");
    const pending = await t.pending();
    await pollUntil(
      () => codeOf(rpc.startRecording({ serverId: pending })),
      (code) => code === "SERVER_NOT_CONNECTED",
      10_000,
    );
    const { serverId, replayId } = await t.recordingServer();
    const del = (path: string) => send(sys.baseUrl, "DELETE", path, { headers: t.bearer() });
    expect((await del(`/v1/api/servers/${serverId}`)).status).toBe(204);
    expect(await codeOf(rpc.finishRecording({ replayId }))).toBe("OK");
    await pollUntil(
      () => codeOf(rpc.startRecording({ serverId })),
      (code) => code === "SERVER_DEAUTHORISED",
      10_000,
    );
    expect((await del(`/v1/api/servers/permanent/${serverId}`)).status).toBe(204);
    await pollUntil(
      () => codeOf(rpc.startRecording({ serverId })),
      (code) => code === "SERVER_NOT_FOUND",
      10_000,
    );
    // Its replay stays (decisions.md §7) and takes the rest of its lifecycle.
    expect(await codeOf(rpc.revokeCollection({ replayId }))).toBe("OK");
  });

  it("refuses malformed and unknown replay ids on every action", async () => {
    const actions = [
      (replayId: string) => rpc.finishRecording({ replayId }),
      (replayId: string) => rpc.setAssetState({ replayId, state: AssetState.PROCESSING }),
      (replayId: string) => rpc.releaseCollection({ replayId }),
      (replayId: string) => rpc.revokeCollection({ replayId }),
      (replayId: string) => rpc.expireReplay({ replayId }),
    ];
    for (const action of actions) {
      expect(await codeOf(action("nope"))).toBe("INVALID_REPLAY_ID");
      expect(await codeOf(action(randomUUID()))).toBe("REPLAY_NOT_FOUND");
    }
  });

  it("refuses a finish that ends before the start, changing nothing", async () => {
    const t = await tenant();
    const { replayId } = await t.recordingServer();
    const before = timestampFromDate(new Date(Date.now() - 3_600_000));
    expect(await codeOf(rpc.finishRecording({ replayId, endedAt: before }))).toBe("INVALID_TRANSITION");
    expect(await codeOf(rpc.finishRecording({ replayId }))).toBe("OK");
  });

  it("refuses an integration over 256 characters and a size_bytes past 2^53 - 1 as INVALID_ARGUMENT, changing nothing", async () => {
    const t = await tenant();
    const { serverId, replayId } = await t.recordingServer();
    // Past 2^53 - 1 the JSON answers could not carry it exactly; near 2^63 the usage sum overflowed (a 500).
    expect(await codeOf(rpc.finishRecording({ replayId, sizeBytes: 2n ** 53n }))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(rpc.finishRecording({ replayId, sizeBytes: 2n ** 63n - 1n }))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(rpc.finishRecording({ replayId, sizeBytes: 1_024n }))).toBe("OK");
    // Random text does not compress under Postgres's index entry limit: it was a 500.
    expect(await codeOf(rpc.startRecording({ serverId, integration: randomBytes(2_048).toString("hex") }))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(await codeOf(rpc.startRecording({ serverId, integration: "🎮".repeat(257) }))).toBe("INVALID_ARGUMENT");
    // The bound itself: 256 characters of four UTF-8 bytes each.
    expect(await codeOf(rpc.startRecording({ serverId, integration: "🎮".repeat(256) }))).toBe("OK");
  });

  it("makes one transition, with one event, when callers race", async () => {
    const t = await tenant();
    const { serverId, replayId } = await t.recordingServer();
    const race = async (call: () => Promise<unknown>) => {
      const codes = await Promise.all(Array.from({ length: 6 }, () => codeOf(call())));
      return codes.sort();
    };
    const five = (code: string) => ["OK", ...Array(5).fill(code)].sort();
    expect(await race(() => rpc.finishRecording({ replayId, sizeBytes: 10n }))).toEqual(five("INVALID_TRANSITION"));
    // Racing starts on one server: one recording.
    expect(await race(() => rpc.startRecording({ serverId }))).toEqual(five("RECORDING_IN_PROGRESS"));
    expect(await race(() => rpc.setAssetState({ replayId, state: AssetState.PROCESSING }))).toEqual(
      five("INVALID_TRANSITION"),
    );
    expect(await race(() => rpc.setAssetState({ replayId, state: AssetState.READY }))).toEqual(
      five("INVALID_TRANSITION"),
    );
    expect(await race(() => rpc.releaseCollection({ replayId }))).toEqual(five("INVALID_TRANSITION"));
    expect(await race(() => rpc.revokeCollection({ replayId }))).toEqual(five("INVALID_TRANSITION"));
    expect(await race(() => rpc.expireReplay({ replayId }))).toEqual(five("INVALID_TRANSITION"));
    await pollUntil(
      () => t.replayCount(serverId),
      (n) => n === 2,
      10_000,
    );
    if (sys.mode !== "distributed") return;
    expect(await eventsOf(replayId)).toEqual(oneOfEach);
  });

  it("refuses a start while the tenant's usage is at or over its quota; an expiry frees it at once", async () => {
    // Refusals change nothing, so the test can poll on them while the plans reach the projection.
    const t = await tenant({ storageQuotaBytes: 0n });
    const serverId = await t.pending();
    await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
    const start = () => codeOf(rpc.startRecording({ serverId }));
    const until = (code: string) => pollUntil(start, (c) => c === code || c === "OK", 10_000);
    expect(await until("STORAGE_QUOTA_EXCEEDED")).toBe("STORAGE_QUOTA_EXCEEDED");
    await sys.admin.updateTenant({ tenantId: t.tenantId, storageQuotaBytes: 1000n });
    const replayIds: string[] = [];
    const started = async () => {
      const { replayId } = (await pollUntil(
        () => rpc.startRecording({ serverId }).catch((err) => ConnectError.from(err)),
        (r) => !(r instanceof ConnectError),
        10_000,
      )) as { replayId: string };
      replayIds.push(replayId);
      return replayId;
    };
    expect(await codeOf(rpc.finishRecording({ replayId: await started(), sizeBytes: 999n }))).toBe("OK");
    // 999 of 1000 used: under the quota.
    expect(await codeOf(rpc.finishRecording({ replayId: await started(), sizeBytes: 1n }))).toBe("OK");
    // At the quota: refused.
    expect(await start()).toBe("STORAGE_QUOTA_EXCEEDED");
    expect(await codeOf(rpc.expireReplay({ replayId: replayIds[1] as string }))).toBe("OK");
    expect(await start()).toBe("OK");
  });

  it("takes a replay through its lifecycle with replayctl; a refused step exits non-zero with the code", async () => {
    const t = await tenant();
    const serverId = await t.pending();
    await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
    const ctl = (...args: string[]) => runReplayctl(sys.internalUrl, args);
    const started = await pollUntil(
      () => ctl("recording", "start", "--server", serverId, "--integration", "rust", "--quality", "hd"),
      (run) => run.code === 0,
      10_000,
    );
    const replayId: string = started.out.replayId;
    expect(started.out).toEqual({ replayId: expect.any(String) });
    const steps = [
      ["recording", "finish", "--replay", replayId, "--size-bytes", "77"],
      ["asset", "set", "--replay", replayId, "--state", "processing"],
      ["asset", "set", "--replay", replayId, "--state", "ready"],
      ["collection", "release", "--replay", replayId],
      ["collection", "revoke", "--replay", replayId],
      ["replay", "expire", "--replay", replayId],
    ];
    for (const step of steps) {
      const run = await ctl(...step);
      expect({ code: run.code, out: run.out }, `${step.join(" ")}: ${run.stderr}`).toEqual({
        code: 0,
        out: { replayId },
      });
    }
    const refused = await ctl("collection", "release", "--replay", replayId);
    expect(refused.code).not.toBe(0);
    expect(refused.problem?.code, refused.stderr).toBe("INVALID_TRANSITION");
  });

  /** The archives a replay's uploads left in the blob store (key tenant/<t>/replay/<r>/<upload>.rpl). */
  async function archivesOf(tenantId: string, replayId: string): Promise<Buffer[]> {
    const dir = join(sys.blobDir, "tenant", tenantId, "replay", replayId);
    const names = await readdir(dir).catch(() => []);
    // The deletion worker may remove a file between the listing and the read: it is gone then.
    const files = await Promise.all(names.map((name) => readFile(join(dir, name)).catch(() => undefined)));
    return files.filter((file) => file !== undefined);
  }
  const signedGet = (t: { signer: Signer }, replayId: string) =>
    sendSigned(sys.baseUrl, t.signer, "GET", `/v1/replays/${replayId}`);
  const storageUsed = async (tenantId: string) =>
    Number((await sys.admin.getTenant({ tenantId })).tenant?.storageUsedBytes);

  it("finishes a recording with its archive from a stock gRPC client; delete removes the blob", async () => {
    const t = await tenant();
    const { replayId } = await t.recordingServer();
    const chunks = [randomBytes(1024 * 1024), randomBytes(1024 * 1024), randomBytes(512 * 1024 + 7)];
    const whole = Buffer.concat(chunks);
    const res = await grpcUploadArchive(sys.internalUrl, { replayId, formatVersion: 3 }, chunks);
    expect(res).toMatchObject({ replayId, sizeBytes: BigInt(whole.length) });
    const got = await signedGet(t, replayId);
    expect(got.status, got.text).toBe(200);
    expect(got.body).toMatchObject({ id: replayId, status: "processing", size_bytes: whole.length, format_version: 3 });
    const stored = await archivesOf(t.tenantId, replayId);
    expect(stored.length).toBe(1);
    expect(stored[0]?.equals(whole)).toBe(true);
    // decisions.md §5: usage is the archive's real size, and a delete frees it and removes the blob.
    expect(await storageUsed(t.tenantId)).toBe(whole.length);
    expect(await codeOf(rpc.finishRecording({ replayId }))).toBe("INVALID_TRANSITION");
    expect((await sendSigned(sys.baseUrl, t.signer, "DELETE", `/v1/replays/${replayId}`)).status).toBe(204);
    expect(await storageUsed(t.tenantId)).toBe(0);
    await pollUntil(
      () => archivesOf(t.tenantId, replayId),
      (left) => left.length === 0,
      10_000,
    );
  });

  it("refuses an upload for a malformed, unknown or finished replay before storing a byte", async () => {
    const t = await tenant();
    const { replayId } = await t.recordingServer();
    const upload = (header: { replayId: string; endedAt?: Timestamp }, ...chunks: Uint8Array[]) =>
      codeOf(
        rpc.uploadArchive(
          (async function* () {
            yield header;
            for (const chunk of chunks) yield { chunk };
          })(),
        ),
      );
    expect(await upload({ replayId: "not-a-uuid" }, Buffer.from("x"))).toBe("INVALID_REPLAY_ID");
    expect(await upload({ replayId: randomUUID() }, Buffer.from("x"))).toBe("REPLAY_NOT_FOUND");
    const before = timestampFromDate(new Date(Date.now() - 365 * 24 * 3600 * 1000));
    expect(await upload({ replayId, endedAt: before }, Buffer.from("x"))).toBe("INVALID_TRANSITION");
    // Header fields belong in the first message only: the upload fails and leaves nothing.
    const late = rpc.uploadArchive(
      (async function* () {
        yield { replayId, chunk: Buffer.from("abc") };
        yield { replayId, chunk: Buffer.from("def") };
      })(),
    );
    expect(await codeOf(late)).toBe("INVALID_ARGUMENT");
    await pollUntil(
      () => archivesOf(t.tenantId, replayId),
      (left) => left.length === 0,
      10_000,
    );
    // Still recording: a stock client's upload finishes it; then the replay is no longer recording.
    expect((await grpcUploadArchive(sys.internalUrl, { replayId }, [Buffer.from("abc")])).sizeBytes).toBe(3n);
    const again = await grpcUploadArchive(sys.internalUrl, { replayId }, [Buffer.from("abc")]).catch((err) => err);
    expect(again.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(await upload({ replayId }, Buffer.from("x"))).toBe("INVALID_TRANSITION");
    expect((await archivesOf(t.tenantId, replayId)).length).toBe(1);
  });

  // Through the gateway's internal port, a cancelled upload finished the replay with the
  // chunks sent so far (its forwarder ended the backend's stream cleanly); a killed recorder too.
  it("finishes nothing on an upload cancelled or cut off mid-stream, on the gateway's port and the replays service's own", async () => {
    const t = await tenant();
    // A size no other upload has, to find this upload's temporary file among the store's.
    const chunks = [randomBytes(65_536), randomBytes(65_536), randomBytes(65_536), randomBytes(12_345)];
    const sent = chunks.reduce((n, c) => n + c.length, 0);
    const tmp = join(sys.blobDir, ".tmp");
    const partOfSize = async () => {
      for (const name of await readdir(tmp).catch(() => [] as string[])) {
        const size = await stat(join(tmp, name)).then(
          (s) => s.size,
          () => -1,
        );
        if (name.endsWith(".part") && size === sent) return name;
      }
      return undefined;
    };
    const ports = [sys.internalUrl, ...(sys.serviceUrls ? [sys.serviceUrls.replays as string] : [])];
    for (const port of ports) {
      for (const end of ["cancel", "kill"] as const) {
        const { replayId } = await t.recordingServer();
        const upload = rawUploadArchive(port, { replayId, formatVersion: 2 }, chunks);
        // Every chunk stored in the upload's temporary file: the service is mid-upload.
        const part = await pollUntil(partOfSize, (name) => name !== undefined, 15_000);
        upload[end]();
        await upload.closed;
        // The upload is over once its temporary file is gone (removed, or renamed into place).
        await pollUntil(
          () =>
            stat(join(tmp, part as string)).then(
              () => true,
              () => false,
            ),
          (exists) => !exists,
          15_000,
        );
        const got = await signedGet(t, replayId);
        expect(got.body, `${end} on ${port}`).toMatchObject({ id: replayId, status: "recording", size_bytes: null });
        expect(await storageUsed(t.tenantId)).toBe(0);
        // Still recording: a whole upload finishes it.
        expect((await grpcUploadArchive(port, { replayId }, [Buffer.from("abc")])).sizeBytes).toBe(3n);
        await expect(storageUsed(t.tenantId)).resolves.toBe(3);
        expect((await sendSigned(sys.baseUrl, t.signer, "DELETE", `/v1/replays/${replayId}`)).status).toBe(204);
      }
    }
  });

  it("holds an upload to the size_bytes its first message declared: a stream ending short finishes nothing", async () => {
    const t = await tenant();
    const { replayId } = await t.recordingServer();
    // A recorder that gave up after 3 of 10 bytes, its stream ended as if whole (a grpc-js cancel).
    const short = rpc.uploadArchive(
      (async function* () {
        yield { replayId, sizeBytes: 10n, chunk: Buffer.from("abc") };
      })(),
    );
    expect(await codeOf(short)).toBe("INVALID_ARGUMENT");
    expect((await signedGet(t, replayId)).body).toMatchObject({ status: "recording" });
    const whole = await rpc.uploadArchive(
      (async function* () {
        yield { replayId, sizeBytes: 6n, chunk: Buffer.from("abc") };
        yield { chunk: Buffer.from("def") };
      })(),
    );
    expect(whole.sizeBytes).toBe(6n);
  });

  it("finishes with replayctl recording finish --archive FILE; expiry removes the archive", async () => {
    const t = await tenant();
    const { replayId } = await t.recordingServer();
    const ctl = (...args: string[]) => runReplayctl(sys.internalUrl, args);
    const dir = await mkdtemp(join(tmpdir(), "replayctl-archive-"));
    try {
      const file = join(dir, "session.rpl");
      const bytes = randomBytes(3 * 1024 * 1024 + 11);
      await writeFile(file, bytes);
      const both = await ctl("recording", "finish", "--replay", replayId, "--archive", file, "--size-bytes", "5");
      expect({ code: both.code, code_: both.problem?.code }).toEqual({ code: 2, code_: "INVALID_ARGUMENT" });
      const missing = await ctl("recording", "finish", "--replay", replayId, "--archive", join(dir, "none.rpl"));
      expect({ code: missing.code, code_: missing.problem?.code }).toEqual({ code: 2, code_: "INVALID_ARGUMENT" });
      const run = await ctl("recording", "finish", "--replay", replayId, "--archive", file);
      expect({ code: run.code, out: run.out }, run.stderr).toEqual({ code: 0, out: { replayId } });
      expect((await signedGet(t, replayId)).body).toMatchObject({ size_bytes: bytes.length, status: "processing" });
      expect((await archivesOf(t.tenantId, replayId))[0]?.equals(bytes)).toBe(true);
      expect(await storageUsed(t.tenantId)).toBe(bytes.length);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await codeOf(rpc.expireReplay({ replayId }))).toBe("OK");
    expect(await storageUsed(t.tenantId)).toBe(0);
    await pollUntil(
      () => archivesOf(t.tenantId, replayId),
      (left) => left.length === 0,
      10_000,
    );
    expect((await signedGet(t, replayId)).body).toMatchObject({ status: "expired" });
  }, 90_000);

  it("gives a replay its tenant's plan retention: 1 day kept means retention_until = started_at + 1 day", async () => {
    const t = await tenant({ retentionDays: 1, storageQuotaBytes: 123_456_789n });
    // The plan reaches the replays service by its event: wait until it has (its quota is known there).
    const replays = createClient(ReplaysService, createGrpcTransport({ baseUrl: sys.internalUrl }));
    await pollUntil(
      () => replays.getStorageUsage({}, { headers: trustedHeaders({ tenantId: t.tenantId }) }),
      (usage) => usage.storageQuotaBytes === 123_456_789n,
      10_000,
    );
    const { replayId } = await t.recordingServer();
    const got = (await signedGet(t, replayId)).body;
    expect(Date.parse(got.retention_until) - Date.parse(got.started_at)).toBe(24 * 3600 * 1000);
    const shown = await runReplayctl(sys.internalUrl, ["tenant", "show", "--tenant", t.tenantId]);
    expect(shown.out).toMatchObject({ tenantId: t.tenantId, retentionDays: 1, hotDays: 1 });
    // Hot days stay within the retention, the stored value standing in for the unset one.
    const over = await runReplayctl(sys.internalUrl, ["tenant", "update", "--tenant", t.tenantId, "--hot-days", "2"]);
    expect({ code: over.code, code_: over.problem?.code }).toEqual({ code: 1, code_: "INVALID_ARGUMENT" });
    await sys.admin.updateTenant({ tenantId: t.tenantId, retentionDays: 400, hotDays: 7 });
    expect((await sys.admin.getTenant({ tenantId: t.tenantId })).tenant).toMatchObject({
      retentionDays: 400,
      hotDays: 7,
    });
    const tooLong = await sys.admin.createTenant({ retentionDays: 3651 }).catch((err) => ConnectError.from(err));
    expect(tooLong).toBeInstanceOf(ConnectError);
  }, 90_000);
});
