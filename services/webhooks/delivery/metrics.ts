import { Counter, Histogram } from "prom-client";
import type { Queryable } from "../../../lib/db/types.js";
import { registry, scrapedGauge } from "../../../lib/metrics.js";
import { queueDepth, unhealthySubscriptions } from "./queue-store.js";

/** Webhook delivery attempts by outcome: succeeded, retrying (another attempt is due), failed (none is), gone (410). */
export const webhookAttempts = new Histogram({
  name: "replay_webhook_attempt_duration_seconds",
  help: "Webhook delivery attempts by outcome and trigger, and how long each took.",
  labelNames: ["outcome", "trigger"] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
  registers: [registry],
});

/** Subscriptions disabled, by reason ("failing": WEBHOOK_DISABLE_AFTER of failure; "manual" by PATCH). */
export const webhookSubscriptionsDisabled = new Counter({
  name: "replay_webhook_subscriptions_disabled_total",
  help: "Webhook subscriptions disabled, by reason: failing (automatically) or manual.",
  labelNames: ["reason"] as const,
  registers: [registry],
});

const queueDepthGauge = scrapedGauge({
  name: "replay_webhook_queue_depth",
  help: "Webhook deliveries pending: an attempt due now or scheduled.",
  labelNames: ["due"] as const,
});

const oldestDueGauge = scrapedGauge({
  name: "replay_webhook_oldest_due_age_seconds",
  help: "How long the oldest webhook delivery with an attempt due has waited for it (0: none due).",
  labelNames: [] as const,
});

const subscriptionsGauge = scrapedGauge({
  name: "replay_webhook_subscriptions",
  help: "Webhook subscriptions that need a look: failing (failed attempts since their last success) or disabled.",
  labelNames: ["state"] as const,
});

/** Reports the delivery queue and unhealthy subscriptions at each scrape until the returned function is called. */
export function watchQueueDepth(db: Queryable): () => void {
  // A scrape collects every family at once: the two queue families share one read in flight.
  let depth: Promise<Awaited<ReturnType<typeof queueDepth>>> | undefined;
  const read = () => {
    depth ??= queueDepth(db).finally(() => {
      depth = undefined;
    });
    return depth;
  };
  const stops = [
    queueDepthGauge.watch(async () => {
      const d = await read();
      return [
        [{ due: "now" }, d.now],
        [{ due: "later" }, d.later],
      ];
    }),
    oldestDueGauge.watch(async () => [[{}, (await read()).oldestDueAgeS]]),
    subscriptionsGauge.watch(async () => {
      const s = await unhealthySubscriptions(db);
      return [
        [{ state: "failing" }, s.failing],
        [{ state: "disabled" }, s.disabled],
      ];
    }),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
