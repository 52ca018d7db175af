import * as http2 from "node:http2";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import {
  RecordingService,
  type UploadArchiveRequest,
  UploadArchiveRequestSchema,
  type UploadArchiveResponse,
  UploadArchiveResponseSchema,
} from "../gen/replay/replays/v1/recording_pb.js";
import {
  CheckInRequestSchema,
  type CheckInResponse,
  CheckInResponseSchema,
  RecorderService,
} from "../gen/replay/servers/v1/recorder_pb.js";
import { internalTokenHeaders } from "../lib/rpc/internal-token.js";
import { send } from "./http.js";

export type CheckInOptions = { pluginVersion?: string; at?: Date; token?: string };

/**
 * A recorder's check-in through a stock gRPC client (@grpc/grpc-js), as recorder infrastructure
 * would send it: proves the services speak standard gRPC, not only Connect.
 */
export async function grpcCheckIn(
  baseUrl: string,
  serverId: string,
  opts: CheckInOptions = {},
): Promise<CheckInResponse> {
  const recorder = grpcRecorder(baseUrl);
  try {
    return await recorder.checkIn(serverId, opts);
  } finally {
    recorder.close();
  }
}

/** One stock gRPC channel for many check-ins, sent as soon as they are made (concurrent calls on one connection). */
export function grpcRecorder(baseUrl: string): {
  checkIn(serverId: string, opts?: CheckInOptions): Promise<CheckInResponse>;
  close(): void;
} {
  const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
  return {
    checkIn(serverId, opts = {}) {
      const request = create(CheckInRequestSchema, {
        serverId,
        pluginVersion: opts.pluginVersion ?? "",
        at: opts.at ? timestampFromDate(opts.at) : undefined,
      });
      return new Promise((resolve, reject) => {
        client.makeUnaryRequest(
          `/${RecorderService.typeName}/CheckIn`,
          (message: typeof request) => Buffer.from(toBinary(CheckInRequestSchema, message)),
          (bytes: Buffer) => fromBinary(CheckInResponseSchema, bytes),
          request,
          metadataOf(internalTokenHeaders(opts.token)),
          { deadline: Date.now() + 10_000 },
          (err, res) => {
            if (err || !res) reject(err ?? new Error("no response"));
            else resolve(res);
          },
        );
      });
    },
    close: () => client.close(),
  };
}

function metadataOf(headers: Record<string, string>): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [name, value] of Object.entries(headers)) metadata.set(name, value);
  return metadata;
}

/**
 * A recorder's archive upload through a stock gRPC client (@grpc/grpc-js, client streaming): the
 * header message naming the replay, then one message per chunk. Resolves to the response, or
 * rejects with grpc-js's error (its `code` is the gRPC status).
 */
export function grpcUploadArchive(
  baseUrl: string,
  header: MessageInitShape<typeof UploadArchiveRequestSchema>,
  chunks: Iterable<Uint8Array>,
): Promise<UploadArchiveResponse> {
  const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
  return new Promise<UploadArchiveResponse>((resolve, reject) => {
    const call = client.makeClientStreamRequest(
      `/${RecordingService.typeName}/UploadArchive`,
      (message: UploadArchiveRequest) => Buffer.from(toBinary(UploadArchiveRequestSchema, message)),
      (bytes: Buffer) => fromBinary(UploadArchiveResponseSchema, bytes),
      new grpc.Metadata(),
      { deadline: Date.now() + 30_000 },
      (err, res) => {
        if (err || !res) reject(err ?? new Error("no response"));
        else resolve(res);
      },
    );
    call.write(create(UploadArchiveRequestSchema, header));
    for (const chunk of chunks) call.write(create(UploadArchiveRequestSchema, { chunk }));
    call.end();
  }).finally(() => client.close());
}

/**
 * A server created through the public API (with `auth`'s headers), connected by a stock gRPC
 * check-in, and a recording started on it through the internal port right after the check-in.
 */
export async function recordingOnNewServer(
  sys: { baseUrl: string; internalUrl: string },
  auth: Record<string, string>,
  name: string,
): Promise<{ serverId: string; replayId: string }> {
  const created = await send(sys.baseUrl, "POST", "/v1/api/servers", { headers: auth, body: { name } });
  const serverId: string = created.body.serverId;
  await grpcCheckIn(sys.internalUrl, serverId);
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  const { replayId } = await recording.startRecording({ serverId });
  return { serverId, replayId };
}

/**
 * An archive upload written frame by frame on a raw HTTP/2 stream (gRPC framing), left open after
 * the chunks so the test can end it the ways a recorder can fail: `cancel()` resets the stream (a
 * gRPC client's cancel: RST_STREAM CANCEL), `kill()` drops the whole connection with no frame at
 * all (the recorder's process killed). `finish()` half-closes it, a whole upload.
 */
export function rawUploadArchive(
  baseUrl: string,
  header: MessageInitShape<typeof UploadArchiveRequestSchema>,
  chunks: Iterable<Uint8Array>,
): { cancel(): void; kill(): void; finish(): void; closed: Promise<void> } {
  const session = http2.connect(baseUrl);
  session.on("error", () => {});
  const stream = session.request({
    ":method": "POST",
    ":path": `/${RecordingService.typeName}/UploadArchive`,
    "content-type": "application/grpc+proto",
    te: "trailers",
  });
  stream.on("error", () => {});
  stream.resume();
  const envelope = (message: MessageInitShape<typeof UploadArchiveRequestSchema>) => {
    const bytes = toBinary(UploadArchiveRequestSchema, create(UploadArchiveRequestSchema, message));
    const frame = Buffer.alloc(5 + bytes.length);
    frame.writeUInt32BE(bytes.length, 1);
    frame.set(bytes, 5);
    return frame;
  };
  stream.write(envelope(header));
  for (const chunk of chunks) stream.write(envelope({ chunk }));
  const closed = new Promise<void>((resolve) => session.once("close", () => resolve()));
  return {
    cancel() {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      session.close();
    },
    kill() {
      session.destroy();
    },
    finish() {
      stream.end();
      stream.once("close", () => session.close());
    },
    closed,
  };
}
