import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../gen/grpc/health/v1/health_pb.js";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { TenantLookupService } from "../gen/replay/identity/v1/lookup_pb.js";
import { MarkersService } from "../gen/replay/markers/v1/markers_pb.js";
import { OutboxService } from "../gen/replay/ops/v1/ops_pb.js";
import { ReplayLookupService } from "../gen/replay/replays/v1/lookup_pb.js";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../gen/replay/replays/v1/replays_pb.js";
import { ServerLookupService } from "../gen/replay/servers/v1/lookup_pb.js";
import { RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { WebhookOpsService, WebhookSecretsService, WebhooksService } from "../gen/replay/webhooks/v1/webhooks_pb.js";
import { sharedSystems } from "./shared-system.js";

// operations.md: each service answers grpc.health.v1.Health/Check (what Kubernetes' grpc probes call).
// Each port also names grpc.health.v1.Health itself, which it serves too.
const served: Record<string, string[]> = {
  markers: [MarkersService.typeName, Health.typeName],
  servers: [ServersService.typeName, RecorderService.typeName, Health.typeName],
  replays: [ReplaysService.typeName, RecordingService.typeName, Health.typeName],
  webhooks: [WebhooksService.typeName, Health.typeName],
};
// The lookups the services make of each other (docs/architecture.md "Owners' answers"), on their own ports only.
// And what the gateway's internal port asks each service for an operator: its outbox (every
// service), the webhooks service's secrets (ReencryptSecrets) and its backlog (forwarded).
const lookups: Record<string, string[]> = {
  markers: [OutboxService.typeName],
  servers: [ServerLookupService.typeName, OutboxService.typeName],
  replays: [ReplayLookupService.typeName, OutboxService.typeName],
  webhooks: [WebhookSecretsService.typeName, WebhookOpsService.typeName, OutboxService.typeName],
};

// The gateway's internal port serves the admin API and the plan lookup, and forwards every
// service's own but the lookups.
const gatewayServed = [
  IdentityAdminService.typeName,
  TenantLookupService.typeName,
  OutboxService.typeName,
  WebhookOpsService.typeName,
  ...new Set(Object.values(served).flat()),
];

describe.each(sharedSystems())("grpc.health.v1 on the gateway's internal port ($mode mode)", (sys) => {
  it("answers SERVING for every service the port serves, forwarded ones included", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: sys.internalUrl }));
    for (const service of ["", ...gatewayServed]) {
      expect((await health.check({ service })).status, service).toBe(Status.SERVING);
    }
    expect(Object.keys((await health.list({})).statuses).sort()).toEqual(["", ...gatewayServed].sort());
  });

  it("answers NOT_FOUND for a service it does not serve", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: sys.internalUrl }));
    await expect(health.check({ service: "replay.nope.v1.NopeService" })).rejects.toMatchObject({ code: 5 });
  });
});

// Both modes give each service a port of its own (the embedded one: MARKERS_PORT, ...),
// which is what the probes and a gRPC client call.
describe.each(sharedSystems())("grpc.health.v1 on every service ($mode mode)", (sys) => {
  const serviceUrls = sys.ownServiceUrls;

  it("answers SERVING for the process and for each service it serves, over the gRPC protocol", async () => {
    for (const [name, forwarded] of Object.entries(served)) {
      const services = [...forwarded, ...(lookups[name] ?? [])];
      const health = createClient(Health, createGrpcTransport({ baseUrl: serviceUrls[name] as string }));
      for (const service of ["", ...services]) {
        expect((await health.check({ service })).status, `${name} ${service}`).toBe(Status.SERVING);
      }
      expect(Object.keys((await health.list({})).statuses).sort(), name).toEqual(["", ...services].sort());
    }
  });

  it("answers NOT_FOUND for a service the process does not serve", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: serviceUrls.servers as string }));
    await expect(health.check({ service: MarkersService.typeName })).rejects.toMatchObject({ code: 5 });
  });
});
