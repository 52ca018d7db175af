import type pg from "pg";
import { decodeEvent, type EventSubject } from "../../lib/bus/events.js";
import { unknownOutcome } from "../../services/webhooks/delivery/queue-store.js";
import { type Invariant, invariant, result } from "./invariant.js";
import { acked, type Model, type Op } from "./model.js";
import type { ReceivedDelivery } from "./receiver.js";

/**
 * The webhook invariants. The events that should produce webhooks are the replays service's
 * committed outbox rows on the eight webhook subjects; each must have exactly one delivery per
 * matching subscription, ended `succeeded` and answered 200 by the receiver. The receiver's
 * requests must match the delivery log (webhooks.attempt), except for at most one unrecorded
 * repeat per webhooks process SIGKILLed (a kill between the receiver's answer and its record).
 */
export type WebhookTotals = { events: number; deliveries: number; attempts: number; received: number };

const eventOfOp: Partial<Record<Op, string>> = {
  finish: "collection.finalized",
  upload: "collection.finalized",
  processing: "asset.processing",
  ready: "asset.ready",
  failed: "asset.failed",
  release: "collection.released",
  revoke: "collection.revoked",
  delete: "asset.deleted",
};

export async function checkWebhooks(deps: {
  db: pg.Client;
  model: Model;
  received: ReceivedDelivery[];
  webhooksKills: number;
}): Promise<{ invariants: Invariant[]; totals: WebhookTotals }> {
  const { db, model } = deps;
  const outbox = (
    await db.query<{ event_id: string; subject: string; payload: Buffer }>(
      "SELECT event_id, subject, payload FROM replays.outbox WHERE subject LIKE 'replays.collection.%' OR subject LIKE 'replays.asset.%'",
    )
  ).rows;
  const events = outbox.map((row) => {
    const decoded = decodeEvent(row.subject as EventSubject, row.payload) as {
      tenantId: string;
      collection?: { replayId: string };
      asset?: { replayId: string };
    };
    const name = row.subject.slice("replays.".length);
    return {
      eventId: row.event_id,
      name,
      tenantId: decoded.tenantId,
      replayId: (decoded.collection ?? decoded.asset)?.replayId ?? "",
    };
  });
  const deliveries = (
    await db.query<{
      delivery_id: string;
      subscription_id: string;
      event_id: string;
      status: string;
      attempt_count: number;
    }>("SELECT delivery_id, subscription_id, event_id, status, attempt_count FROM webhooks.delivery")
  ).rows;
  const attempts = (
    await db.query<{ delivery_id: string; attempt: number; status_code: number | null; error: string | null }>(
      "SELECT delivery_id, attempt, status_code, error FROM webhooks.attempt ORDER BY delivery_id, attempt",
    )
  ).rows;

  const emitted = invariant("every acknowledged transition emitted its event");
  const named = new Set(events.map((e) => `${e.replayId} ${e.name}`));
  for (const r of model.replays.values())
    for (const [op, name] of Object.entries(eventOfOp))
      if (acked(r, op as Op))
        emitted.check(
          named.has(`${r.replayId} ${name}`),
          () => `replay ${r.replayId}: ${op} acknowledged, no ${name} in replays.outbox`,
        );

  const deliveryOf = new Map(deliveries.map((d) => [`${d.subscription_id} ${d.event_id}`, d]));
  const byPathEvent = new Map<string, ReceivedDelivery[]>();
  for (const r of deps.received) {
    const k = `${r.path} ${r.eventId}`;
    byPathEvent.set(k, [...(byPathEvent.get(k) ?? []), r]);
  }
  const attemptsOf = new Map<string, typeof attempts>();
  for (const a of attempts) attemptsOf.set(a.delivery_id, [...(attemptsOf.get(a.delivery_id) ?? []), a]);

  const delivered = invariant("one delivery per event and matching subscription, succeeded and answered 200");
  const expected = new Set<string>();
  for (const e of events) {
    for (const s of model.subscriptions) {
      if (s.tenantId !== e.tenantId || !s.events.includes(e.name)) continue;
      expected.add(`${s.id} ${e.eventId}`);
      const d = deliveryOf.get(`${s.id} ${e.eventId}`);
      const got = byPathEvent.get(`${s.path} ${e.eventId}`) ?? [];
      delivered.check(
        d?.status === "succeeded" && got.some((g) => g.status === 200),
        () =>
          `${e.name} ${e.eventId} (replay ${e.replayId}) to subscription ${s.id}: delivery ${d ? d.status : "missing"}, receiver got ${got.map((g) => g.status).join(",") || "nothing"}`,
      );
    }
  }
  const unexpected = invariant("no delivery for an event or subscription that does not call for one");
  for (const d of deliveries)
    unexpected.check(
      expected.has(`${d.subscription_id} ${d.event_id}`),
      () => `delivery ${d.delivery_id} (event ${d.event_id}, subscription ${d.subscription_id})`,
    );

  // Receiver requests against the delivery log, per delivery: an excess is one problem per extra request.
  const pathOf = new Map(model.subscriptions.map((s) => [s.id, s.path]));
  const unrecorded: string[] = [];
  const phantom: string[] = [];
  const repeated: string[] = [];
  for (const d of deliveries) {
    const got = byPathEvent.get(`${pathOf.get(d.subscription_id)} ${d.event_id}`) ?? [];
    const recorded = attemptsOf.get(d.delivery_id) ?? [];
    const story = () =>
      `event ${d.event_id} to subscription ${d.subscription_id}: receiver answered ${got.map((g) => g.status).join(",") || "nothing"}; attempts recorded ${recorded.map((a) => a.status_code ?? a.error).join(",") || "none"}`;
    // An attempt whose sender stopped before recording an answer (logged by the claim that took its
    // delivery over, or by its release) may or may not have reached the receiver, and may have been
    // answered 200.
    const unknown = recorded.filter((a) => a.status_code === null && unknownErrors.has(a.error ?? "")).length;
    for (let i = recorded.length; i < got.length; i++) unrecorded.push(story());
    for (let i = got.length; i < recorded.length - unknown; i++) phantom.push(story());
    const first200 = got.findIndex((g) => g.status === 200);
    const firstOk = recorded.findIndex(
      (a) =>
        (a.status_code !== null && a.status_code >= 200 && a.status_code < 300) ||
        (a.status_code === null && unknownErrors.has(a.error ?? "")),
    );
    const after = first200 === -1 ? 0 : got.length - first200 - 1;
    const loggedAfter = firstOk === -1 ? 0 : recorded.length - firstOk - 1;
    for (let i = loggedAfter; i < after; i++) repeated.push(story());
  }
  const allowance = deps.webhooksKills;
  const log = excess(
    `receiver requests = recorded attempts (allowing ${allowance} unrecorded, one per webhooks SIGKILL)`,
    deliveries.length,
    [...unrecorded.slice(allowance), ...phantom],
    unrecorded.slice(0, allowance),
  );
  const repeats = excess(
    `no event received again after a 200 unless the delivery log shows it (allowing ${allowance})`,
    deliveries.length,
    repeated.slice(allowance),
    repeated.slice(0, allowance),
  );

  return {
    invariants: [...[emitted, delivered, unexpected].map(result), log, repeats],
    totals: {
      events: events.length,
      deliveries: deliveries.length,
      attempts: attempts.length,
      received: deps.received.length,
    },
  };
}

const unknownErrors = new Set<string>(Object.values(unknownOutcome));

/** An invariant over counted problems, some of them allowed (shown as such, not counted). */
function excess(name: string, checked: number, problems: string[], allowed: string[]): Invariant {
  const distinct = [...new Set(problems)];
  return {
    name,
    checked,
    violations: problems.length,
    examples: [...distinct.slice(0, 3), ...allowed.slice(0, 1).map((a) => `(allowed) ${a}`)],
  };
}
