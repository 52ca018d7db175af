// The gRPC hardening's points through the other clients we did not write, beside the Python suite
// (test/interop-python.test.ts): grpc-js (@grpc/grpc-js, the stock Node client) and `buf curl` (Go's
// gRPC over net/http2, with proto/ as its schema), against one shared system (the same servers in both modes), on
// the gateway's internal port and each service's own.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, type DescMessage, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
  HealthCheckResponseSchema,
} from "../gen/grpc/health/v1/health_pb.js";
import { ErrorDetailSchema } from "../gen/replay/common/v1/common_pb.js";
import { MarkersService } from "../gen/replay/markers/v1/markers_pb.js";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../gen/replay/replays/v1/replays_pb.js";
import { CheckInRequestSchema, RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { WebhooksService } from "../gen/replay/webhooks/v1/webhooks_pb.js";
import { oneSharedSystem } from "./shared-system.js";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
const buf = join(root, "node_modules", ".bin", "buf");

/** The service names each service's own port serves. */
const served: Record<string, string[]> = {
  markers: [MarkersService.typeName],
  servers: [ServersService.typeName, RecorderService.typeName],
  replays: [ReplaysService.typeName, RecordingService.typeName],
  webhooks: [WebhooksService.typeName],
};
const everyName = Object.values(served).flat();

type Outcome = { code: grpc.status; details: string; metadata: grpc.Metadata | undefined; bytes?: Buffer };

/**
 * One unary call through a grpc-js channel of its own, with the request's bytes; never rejects. The
 * 30 s deadline is for a call that hangs, not a measure of speed.
 */
function grpcJsCall<T extends DescMessage>(
  url: string,
  path: string,
  schema: T,
  request: MessageInitShape<T>,
  opts: { metadata?: grpc.Metadata; channelOptions?: grpc.ChannelOptions } = {},
): Promise<Outcome> {
  const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure(), opts.channelOptions);
  return new Promise<Outcome>((resolve) => {
    client.makeUnaryRequest(
      path,
      (bytes: Buffer) => bytes,
      (bytes: Buffer) => bytes,
      Buffer.from(toBinary(schema, create(schema, request))),
      opts.metadata ?? new grpc.Metadata(),
      { deadline: Date.now() + 30_000 },
      (err, bytes) => {
        resolve(
          err
            ? { code: err.code, details: err.details, metadata: err.metadata }
            : { code: grpc.status.OK, details: "", metadata: undefined, bytes },
        );
      },
    );
  }).finally(() => client.close());
}

async function grpcJsHealth(url: string, service: string, channelOptions?: grpc.ChannelOptions): Promise<string> {
  const res = await grpcJsCall(
    url,
    `/${Health.typeName}/Check`,
    HealthCheckRequestSchema,
    { service },
    { channelOptions },
  );
  if (res.code !== grpc.status.OK) return `${grpc.status[res.code]} ${res.details}`;
  return HealthCheckResponse_ServingStatus[fromBinary(HealthCheckResponseSchema, res.bytes as Buffer).status] as string;
}

/** `buf curl` over gRPC with proto/ as its schema: the answer's JSON, or the error's (buf prints it on stderr). */
async function bufCurl(url: string, path: string, body: unknown): Promise<Record<string, any>> {
  const args = ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--schema", "proto", "--timeout", "30s"];
  const run = promisify(execFile)(buf, [...args, "-d", JSON.stringify(body), `${url}${path}`], { cwd: root });
  const { stdout } = await run.catch((err: { stdout: string; stderr: string }) => ({ stdout: err.stderr }));
  return JSON.parse(stdout);
}

describe.each(oneSharedSystem())("grpc-js and buf curl: the hardening's points ($mode mode)", (sys) => {
  const everyPort = [sys.internalUrl, ...Object.values(sys.ownServiceUrls)];
  const recorderPorts = [sys.internalUrl, sys.ownServiceUrls.servers as string];

  it("point 1: a metadata value of 65 545 bytes gets a gRPC status at once, not a hang to the deadline (grpc-js)", async () => {
    const metadata = new grpc.Metadata();
    metadata.set("x-big", "a".repeat(65_545));
    for (const url of recorderPorts) {
      const res = await grpcJsCall(
        url,
        `/${RecorderService.typeName}/CheckIn`,
        CheckInRequestSchema,
        { serverId: "x" },
        { metadata },
      );
      // Refused for its size, or (grpc-js compresses it under the limit) answered as any check-in.
      // "At once" is the code, not a time: the hang this was ends in DEADLINE_EXCEEDED at the call's
      // deadline, which is not among these, while a busy machine only makes the right answer slower.
      expect([grpc.status.RESOURCE_EXHAUSTED, grpc.status.INVALID_ARGUMENT], `${url}: ${res.details}`).toContain(
        res.code,
      );
    }
  });

  it("point 2: a grpc-js channel with gzip works on every port", async () => {
    for (const url of everyPort) {
      expect(await grpcJsHealth(url, "", { "grpc.default_compression_algorithm": 2 }), url).toBe("SERVING");
    }
  });

  it("point 3: an unknown method is UNIMPLEMENTED with a gRPC status, not an HTTP 404", async () => {
    for (const url of everyPort) {
      for (const path of [`/${RecorderService.typeName}/NoSuchMethod`, "/no.such.v1.Service/Call"]) {
        const res = await grpcJsCall(url, path, HealthCheckRequestSchema, {});
        expect(res.code, `${path} on ${url}`).toBe(grpc.status.UNIMPLEMENTED);
        expect(res.details, `${path} on ${url}`).not.toMatch(/404/);
      }
    }
  });

  it("point 4: Health on the gateway's internal port names every service it forwards (grpc-js, buf curl)", async () => {
    for (const name of everyName) expect(await grpcJsHealth(sys.internalUrl, name), name).toBe("SERVING");
    const res = await bufCurl(sys.internalUrl, `/${Health.typeName}/Check`, { service: RecorderService.typeName });
    expect(res).toEqual({ status: "SERVING" });
  });

  it("point 5: each service answers Health on its own port for the names it serves (grpc-js, buf curl)", async () => {
    for (const [service, names] of Object.entries(served)) {
      const url = sys.ownServiceUrls[service] as string;
      for (const name of ["", ...names]) {
        expect(await grpcJsHealth(url, name), `${service} ${name}`).toBe("SERVING");
        expect(await bufCurl(url, `/${Health.typeName}/Check`, { service: name }), `${service} ${name}`).toEqual({
          status: "SERVING",
        });
      }
      expect(await grpcJsHealth(url, "no.such.v1.Service")).toMatch(/^NOT_FOUND/);
    }
  });

  it("point 6: error details decode from grpc-status-details-bin as google.rpc.Status, with code generated from proto/ (grpc-js, buf curl)", async () => {
    for (const url of recorderPorts) {
      const serverId = crypto.randomUUID();
      const res = await grpcJsCall(url, `/${RecorderService.typeName}/CheckIn`, CheckInRequestSchema, { serverId });
      expect(res.code).toBe(grpc.status.NOT_FOUND);
      const [bin] = res.metadata?.get("grpc-status-details-bin") ?? [];
      const status = fromBinary(StatusSchema, bin as Buffer);
      expect(status).toMatchObject({ code: grpc.status.NOT_FOUND, message: `no server ${serverId}` });
      const [detail] = status.details.map((any) => anyUnpack(any, ErrorDetailSchema));
      expect(detail?.code).toBe("SERVER_NOT_FOUND");

      const curled = await bufCurl(url, `/${RecorderService.typeName}/CheckIn`, { serverId });
      expect(curled).toMatchObject({ code: "not_found", details: [{ type: "replay.common.v1.ErrorDetail" }] });
      expect(fromBinary(ErrorDetailSchema, Buffer.from(curled.details[0].value, "base64")).code).toBe(
        "SERVER_NOT_FOUND",
      );
    }
  });
});
