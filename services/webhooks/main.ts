import { WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import type { Config } from "../../lib/config.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";

/** The webhooks service: subscriptions and signed deliveries. Its RPCs land with the webhooks issue. */
export const webhooksService: ServiceSpec = {
  name: "webhooks",
  healthNames: [WebhooksService.typeName],
  setup: () => ({
    routes(router) {
      router.service(WebhooksService, {});
    },
  }),
};

export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(webhooksService, config, platform);
}
