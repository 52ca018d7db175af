import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import {
  CheckInRequestSchema,
  type CheckInResponse,
  CheckInResponseSchema,
  RecorderService,
} from "../gen/replay/servers/v1/recorder_pb.js";
import { internalTokenHeaders } from "../lib/rpc/internal-token.js";

/**
 * A recorder's check-in through a stock gRPC client (@grpc/grpc-js), as recorder infrastructure
 * would send it: proves the services speak standard gRPC, not only Connect.
 */
export function grpcCheckIn(
  baseUrl: string,
  serverId: string,
  opts: { pluginVersion?: string; at?: Date; token?: string } = {},
): Promise<CheckInResponse> {
  const client = new grpc.Client(new URL(baseUrl).host, grpc.credentials.createInsecure());
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
        client.close();
        if (err || !res) reject(err ?? new Error("no response"));
        else resolve(res);
      },
    );
  });
}

function metadataOf(headers: Record<string, string>): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [name, value] of Object.entries(headers)) metadata.set(name, value);
  return metadata;
}
