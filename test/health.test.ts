import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../gen/grpc/health/v1/health_pb.js";
import { MarkersService } from "../gen/replay/markers/v1/markers_pb.js";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../gen/replay/replays/v1/replays_pb.js";
import { RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { WebhooksService } from "../gen/replay/webhooks/v1/webhooks_pb.js";
import { distributedSkipReason, startDistributedSystem } from "./system.js";
import { useSystem } from "./use-system.js";

// operations.md: each service answers grpc.health.v1.Health/Check (what Kubernetes' grpc probes call).
const served: Record<string, string[]> = {
  markers: [MarkersService.typeName],
  servers: [ServersService.typeName, RecorderService.typeName],
  replays: [ReplaysService.typeName, RecordingService.typeName],
  webhooks: [WebhooksService.typeName],
};

describe.skipIf(distributedSkipReason())("grpc.health.v1 on every service (distributed mode)", () => {
  const system = useSystem(() => startDistributedSystem());

  it("answers SERVING for the process and for each service it serves, over the gRPC protocol", async () => {
    const sys = system();
    for (const [name, services] of Object.entries(served)) {
      const health = createClient(Health, createGrpcTransport({ baseUrl: sys.serviceUrls?.[name] as string }));
      for (const service of ["", ...services]) {
        expect((await health.check({ service })).status, `${name} ${service}`).toBe(Status.SERVING);
      }
    }
  });

  it("answers NOT_FOUND for a service the process does not serve", async () => {
    const sys = system();
    const health = createClient(Health, createGrpcTransport({ baseUrl: sys.serviceUrls?.servers as string }));
    await expect(health.check({ service: MarkersService.typeName })).rejects.toMatchObject({ code: 5 });
  });
});
