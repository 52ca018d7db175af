import { type Command, command } from "../command.js";
import { int32 } from "../flags.js";
import { isoOrNull } from "../respond.js";

/**
 * replayctl outbox … and webhook … : what the runbooks (docs/runbooks/) ask for that no metric
 * shows: the oldest event an outbox holds back, and which subscriptions a webhook backlog is.
 */
export const onCallCommands: readonly Command[] = [
  command({
    noun: "outbox",
    verb: "status",
    flags: {},
    run: async (c) => {
      const res = await c.outbox.outboxStatus({});
      return {
        outboxes: res.outboxes.map((o) => ({
          schema: o.schema,
          unpublished: Number(o.unpublished),
          oldestEventId: o.oldestEventId === "" ? null : o.oldestEventId,
          oldestSubject: o.oldestSubject === "" ? null : o.oldestSubject,
          oldestCreatedAt: isoOrNull(o.oldestCreatedAt),
        })),
      };
    },
  }),
  command({
    noun: "webhook",
    verb: "backlog",
    flags: { limit: int32(1, 1_000) },
    run: async (c, v) => {
      const res = await c.webhookOps.backlog({ limit: v.limit });
      return {
        subscriptions: res.subscriptions.map((s) => ({
          subscriptionId: s.subscriptionId,
          tenantId: s.tenantId,
          pending: Number(s.pending),
          due: Number(s.due),
          oldestDueAt: isoOrNull(s.oldestDueAt),
          failingSince: isoOrNull(s.failingSince),
          disabled: s.disabled,
          rateLimitPerSecond: s.rateLimitPerSecond ?? null,
        })),
      };
    },
  }),
];
