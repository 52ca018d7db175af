import { describe, expect, it } from "vitest";
import { pollUntil } from "./poll.js";
import { runReplayctl } from "./replayctl.js";
import { sharedSystems } from "./shared-system.js";
import { tenantOn } from "./webhook-tenant.js";

// replayctl's on-call commands (docs/runbooks/): every process's outbox with its oldest unpublished
// event, and the webhook backlog by subscription, through the gateway's internal port in both modes.

describe.each(sharedSystems())("replayctl for on-call ($mode mode)", (sys) => {
  it("outbox status lists every process's outbox, the identity schema's included", async () => {
    const cli = await runReplayctl(sys.internalUrl, ["outbox", "status"]);
    expect(cli.code, cli.stderr).toBe(0);
    const outboxes = cli.out.outboxes as { schema: string; unpublished: number; oldestEventId: string | null }[];
    expect(outboxes.map((o) => o.schema)).toEqual(["identity", "markers", "replays", "servers", "webhooks"]);
    for (const outbox of outboxes) {
      expect(outbox.unpublished).toBeGreaterThanOrEqual(0);
      if (outbox.unpublished === 0) expect(outbox.oldestEventId).toBeNull();
    }
  });

  it("webhook backlog shows a disabled subscription's held deliveries, its tenant and state", async () => {
    const t = await tenantOn(sys);
    const { id } = await t.subscribe("https://hooks.replay.invalid/held", ["collection.finalized"]);
    expect((await t.signed("PATCH", `/v1/webhooks/${id}`, { disabled: true, rateLimitPerSecond: 7 })).status).toBe(200);
    await t.finishedReplay();
    await t.finishedReplay();
    const entry = await pollUntil(
      async () => {
        const cli = await runReplayctl(sys.internalUrl, ["webhook", "backlog", "--limit", "1000"]);
        expect(cli.code, cli.stderr).toBe(0);
        return (cli.out.subscriptions as { subscriptionId: string; pending: number }[]).find(
          (s) => s.subscriptionId === id,
        );
      },
      (found) => found?.pending === 2,
      15_000,
      200,
    );
    expect(entry).toEqual({
      subscriptionId: id,
      tenantId: t.signer.tenant,
      pending: 2,
      due: 0,
      oldestDueAt: null,
      failingSince: null,
      disabled: true,
      rateLimitPerSecond: 7,
    });
    const refused = await runReplayctl(sys.internalUrl, ["webhook", "backlog", "--limit", "0"]);
    expect(refused.code).not.toBe(0);
  });
});
