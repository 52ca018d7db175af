import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { type Client, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import {
  type AssetState,
  RecordingService,
  type UploadArchiveRequest,
  UploadArchiveRequestSchema,
} from "../../gen/replay/replays/v1/recording_pb.js";
import { contractCodeOf } from "../../lib/rpc/errors.js";
import { type Res, type Signer, send, sendSigned } from "../http.js";
import { grpcRecorder } from "../recorder.js";
import { type Entry, grpcOutcome, grpcStatusName, httpOutcome, type Journal, type Outcome } from "./journal.js";

/**
 * The requests the load sends, each as a real client sends it (public HTTP with a bearer key or a
 * signature; recorder and recording calls over gRPC on the gateway's internal port), and each
 * journaled with its answer. Nothing here retries; the load decides that, as a client would.
 */
export type Tenant = { tenantId: string; bearer: Record<string, string>; signer: Signer };

export type Result<T> = { outcome: Outcome; entry: Entry; value?: T };

const RPC_TIMEOUT_MS = 10_000;

export type Api = ReturnType<typeof createApi>;

export function createApi(deps: { publicUrl: string; internalUrl: string; journal: Journal }) {
  const { journal } = deps;
  const recording: Client<typeof RecordingService> = createClient(
    RecordingService,
    createGrpcTransport({ baseUrl: deps.internalUrl }),
  );
  const recorder = grpcRecorder(deps.internalUrl);

  async function http(
    op: string,
    t: Tenant,
    target: string | undefined,
    call: () => Promise<Res>,
    idempotencyKey?: string,
  ): Promise<Result<Res>> {
    const startMs = Date.now();
    let res: Res | undefined;
    let error: string | undefined;
    try {
      res = await call();
    } catch (err) {
      error = (err as Error).message;
    }
    const status = res?.status ?? 0;
    const entry = journal.record({
      op,
      via: "http",
      tenantId: t.tenantId,
      target,
      startMs,
      endMs: Date.now(),
      status: res ? status : "network",
      code: res ? (res.body as { code?: string } | undefined)?.code : error,
      outcome: httpOutcome(status),
      ...(idempotencyKey ? { idempotencyKey } : {}),
    });
    return { outcome: entry.outcome, entry, value: res };
  }

  async function rpc<T>(op: string, t: Tenant, target: string | undefined, call: () => Promise<T>): Promise<Result<T>> {
    const startMs = Date.now();
    let value: T | undefined;
    let status = "OK";
    let code: string | undefined;
    try {
      value = await call();
    } catch (err) {
      const grpcCode = (err as { code?: unknown }).code;
      // grpc-js errors carry a numeric code; Connect's are ConnectErrors with the contract code in a detail.
      if (err instanceof ConnectError) {
        status = grpcStatusName(err.code);
        code = contractCodeOf(err)?.code ?? err.rawMessage;
      } else if (typeof grpcCode === "number") {
        status = grpcStatusName(grpcCode);
        code = (err as Error).message;
      } else {
        status = "UNKNOWN";
        code = `client: ${(err as Error).message}`;
      }
    }
    const entry = journal.record({
      op,
      via: "grpc",
      tenantId: t.tenantId,
      target,
      startMs,
      endMs: Date.now(),
      status,
      code,
      outcome: grpcOutcome(status),
    });
    return { outcome: entry.outcome, entry, value };
  }

  const opts = () => ({ timeoutMs: RPC_TIMEOUT_MS });
  const sign = (t: Tenant, method: string, path: string, body?: unknown) =>
    sendSigned(deps.publicUrl, t.signer, method, path, { body });

  return {
    createServer: (t: Tenant, name: string) =>
      http("createServer", t, undefined, () =>
        send(deps.publicUrl, "POST", "/v1/api/servers", { headers: t.bearer, body: { name } }),
      ),
    listServers: (t: Tenant) =>
      http("listServers", t, undefined, () => send(deps.publicUrl, "GET", "/v1/api/servers", { headers: t.bearer })),
    checkIn: (t: Tenant, serverId: string) =>
      rpc("checkIn", t, serverId, () => recorder.checkIn(serverId, { pluginVersion: "soak-1" })),
    startRecording: (t: Tenant, serverId: string) =>
      rpc("startRecording", t, serverId, () => recording.startRecording({ serverId, integration: "soak" }, opts())),
    finishRecording: (t: Tenant, replayId: string, sizeBytes: bigint) =>
      rpc("finishRecording", t, replayId, () =>
        recording.finishRecording({ replayId, sizeBytes, formatVersion: 1 }, opts()),
      ),
    uploadArchive: (t: Tenant, replayId: string, chunks: Uint8Array[], cancelAfterChunks?: number) =>
      rpc(cancelAfterChunks === undefined ? "uploadArchive" : "uploadArchive.cancelled", t, replayId, () =>
        uploadArchive(deps.internalUrl, { replayId, formatVersion: 1 }, chunks, cancelAfterChunks),
      ),
    setAssetState: (t: Tenant, replayId: string, state: AssetState, name: string) =>
      rpc(`setAssetState.${name}`, t, replayId, () => recording.setAssetState({ replayId, state }, opts())),
    releaseCollection: (t: Tenant, replayId: string) =>
      rpc("releaseCollection", t, replayId, () => recording.releaseCollection({ replayId }, opts())),
    revokeCollection: (t: Tenant, replayId: string) =>
      rpc("revokeCollection", t, replayId, () => recording.revokeCollection({ replayId }, opts())),
    createMarker: (t: Tenant, op: string, target: string, body: object, idempotencyKey?: string) =>
      http(
        op,
        t,
        target,
        () =>
          send(deps.publicUrl, "POST", "/v1/api/timeline-events", {
            headers: { ...t.bearer, ...(idempotencyKey ? { "idempotency-key": idempotencyKey } : {}) },
            body,
          }),
        idempotencyKey,
      ),
    getReplay: (t: Tenant, replayId: string) =>
      http("getReplay", t, replayId, () => sign(t, "GET", `/v1/replays/${replayId}`)),
    deleteReplay: (t: Tenant, replayId: string) =>
      http("deleteReplay", t, replayId, () => sign(t, "DELETE", `/v1/replays/${replayId}`)),
    createSubscription: (t: Tenant, url: string, events: string[]) =>
      http("createSubscription", t, undefined, () => sign(t, "POST", "/v1/webhooks", { url, events })),
    close: () => recorder.close(),
  };
}

/**
 * UploadArchive through a stock gRPC client on a channel of its own (a new connection, so the
 * balancer spreads uploads over the gateways). With `cancelAfterChunks`, the client gives up after
 * sending that many chunks, before ending the stream: the upload must change nothing.
 */
function uploadArchive(
  baseUrl: string,
  header: MessageInitShape<typeof UploadArchiveRequestSchema>,
  chunks: Uint8Array[],
  cancelAfterChunks: number | undefined,
): Promise<unknown> {
  const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.makeClientStreamRequest(
      `/${RecordingService.typeName}/UploadArchive`,
      (message: UploadArchiveRequest) => Buffer.from(toBinary(UploadArchiveRequestSchema, message)),
      (bytes: Buffer) => bytes,
      new grpc.Metadata(),
      { deadline: Date.now() + 30_000 },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    // The whole archive's size declared, as a recorder should: a stream that ends short of it
    // (this client's cancel half-closes before it resets) can never finish the replay.
    const sizeBytes = BigInt(chunks.reduce((n, c) => n + c.length, 0));
    call.write(create(UploadArchiveRequestSchema, { ...header, sizeBytes }));
    const sent = cancelAfterChunks === undefined ? chunks : chunks.slice(0, cancelAfterChunks);
    for (const chunk of sent) call.write(create(UploadArchiveRequestSchema, { chunk }));
    if (cancelAfterChunks === undefined) call.end();
    // Long enough for what was sent to reach the server, as a recorder that gives up mid-way.
    else setTimeout(() => call.cancel(), 300);
  }).finally(() => client.close());
}
