import { WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import type { Config } from "../../lib/config.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, startService } from "../../lib/service-host.js";

/** The webhooks service: subscriptions and signed deliveries. Its RPCs land with the webhooks issue. */
export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(
    {
      name: "webhooks",
      healthNames: [WebhooksService.typeName],
      setup: () => ({
        routes(router) {
          router.service(WebhooksService, {});
        },
      }),
    },
    config,
    platform,
  );
}
