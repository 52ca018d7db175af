import { timestampDate } from "@bufbuild/protobuf/wkt";
import type {
  RecoverDeliveriesRequest,
  RotateSubscriptionSecretRequest,
  UpdateSubscriptionRequest,
} from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { DomainError, type FieldViolation } from "../../lib/errors.js";
import type { AllowTargets, Resolver } from "./delivery/target.js";
import { vetWebhookUrl } from "./delivery/webhook-url.js";
import { webhookEvents } from "./payload.js";
import type { SubscriptionChange } from "./subscription-store.js";

// decisions.md §6, §6.1: each refusal is VALIDATION_ERROR with one violation per field.

const SUBSCRIPTION_EVENTS_MAX = 32;
/** rateLimitPerSecond's range; null is unlimited. */
export const RATE_LIMIT_MAX = 10_000;
/** A rotation's overlap: 24 hours unless asked, seven days at most. */
export const GRACE_SECONDS_DEFAULT = 86_400;
export const GRACE_SECONDS_MAX = 604_800;
export const UPDATABLE_FIELDS = ["url", "events", "disabled", "rateLimitPerSecond"] as const;

const violation = (field: string, detail: string): FieldViolation => ({ field, code: "VALIDATION_ERROR", detail });

function refuse(violations: readonly FieldViolation[]): void {
  if (violations.length > 0) {
    throw new DomainError("VALIDATION_ERROR", violations.map((v) => v.detail).join("; "), [...violations]);
  }
}

/** 1 to 32 unique names of the eight, matched exactly. */
export function eventsViolation(events: readonly string[]): FieldViolation | undefined {
  const known = new Set<string>(webhookEvents);
  const valid = `the valid names are ${webhookEvents.join(", ")}`;
  const unknown = events.filter((name) => !known.has(name));
  let detail: string | undefined;
  if (unknown.length > 0) detail = `unknown event name ${JSON.stringify(unknown[0])}; ${valid}`;
  else if (events.length === 0) detail = `events must name at least one event; ${valid}`;
  else if (events.length > SUBSCRIPTION_EVENTS_MAX)
    detail = `events may name at most ${SUBSCRIPTION_EVENTS_MAX} events; ${valid}`;
  else if (new Set(events).size !== events.length) detail = `events must not repeat a name; ${valid}`;
  return detail === undefined ? undefined : violation("events", detail);
}

/** At least one field and none unknown; url and events by the create's rules. */
export async function subscriptionChange(
  req: UpdateSubscriptionRequest,
  urls: { resolve: Resolver; allowTargets: AllowTargets },
): Promise<SubscriptionChange> {
  const violations: FieldViolation[] = [];
  const fields = new Set(req.fields);
  const malformed = new Set(req.malformedFields);
  for (const name of req.unknownFields) {
    violations.push(
      violation(
        name,
        `unknown field ${JSON.stringify(name)}; a subscription's changeable fields are ${UPDATABLE_FIELDS.join(", ")}`,
      ),
    );
  }
  if (fields.size === 0 && req.unknownFields.length === 0 && malformed.size === 0) {
    violations.push(violation("body", `name at least one of ${UPDATABLE_FIELDS.join(", ")}`));
  }
  const change: SubscriptionChange = {};
  if (malformed.has("url")) violations.push(violation("url", "url must be a string"));
  else if (fields.has("url")) {
    const bad = await vetWebhookUrl(req.url, urls);
    if (bad) violations.push(bad);
    change.url = req.url;
  }
  if (malformed.has("events")) {
    violations.push(
      violation("events", `events must be an array of event names; the valid names are ${webhookEvents.join(", ")}`),
    );
  } else if (fields.has("events")) {
    const bad = eventsViolation(req.events);
    if (bad) violations.push(bad);
    change.events = req.events;
  }
  if (malformed.has("disabled")) violations.push(violation("disabled", "disabled must be true or false"));
  else if (fields.has("disabled")) change.disabled = req.disabled;
  const rate = req.rateLimitPerSecond;
  if (malformed.has("rateLimitPerSecond") || (rate !== undefined && (rate < 1 || rate > RATE_LIMIT_MAX))) {
    violations.push(
      violation(
        "rateLimitPerSecond",
        `rateLimitPerSecond must be an integer from 1 to ${RATE_LIMIT_MAX}, or null for no limit`,
      ),
    );
  } else if (fields.has("rateLimitPerSecond")) change.rateLimitPerSecond = rate ?? null;
  refuse(violations);
  return change;
}

export function graceSecondsOf(req: RotateSubscriptionSecretRequest): number {
  const grace = req.graceSeconds === undefined ? GRACE_SECONDS_DEFAULT : Number(req.graceSeconds);
  if (req.malformedFields.includes("graceSeconds") || grace < 0 || grace > GRACE_SECONDS_MAX) {
    refuse([violation("graceSeconds", `graceSeconds must be an integer from 0 to ${GRACE_SECONDS_MAX}`)]);
  }
  return grace;
}

/** [since, until): since not in the future nor before the log's retention; until unset: now. */
export function recoverWindow(
  req: RecoverDeliveriesRequest,
  logRetentionMs: number,
  nowMs = Date.now(),
): { since: Date; until: Date } {
  const violations: FieldViolation[] = [];
  const malformed = new Set(req.malformedFields);
  const since = req.since && !malformed.has("since") ? timestampDate(req.since) : undefined;
  const until = req.until && !malformed.has("until") ? timestampDate(req.until) : new Date(nowMs);
  if (malformed.has("until")) violations.push(violation("until", "until must be an RFC 3339 time"));
  if (!since) violations.push(violation("since", "since is required: an RFC 3339 time"));
  else if (since.getTime() > nowMs) violations.push(violation("since", "since must not be in the future"));
  else if (since.getTime() < nowMs - logRetentionMs) {
    violations.push(
      violation("since", "since must not be before the delivery log's retention (WEBHOOK_LOG_RETENTION)"),
    );
  } else if (since.getTime() > until.getTime()) violations.push(violation("since", "since must not be after until"));
  refuse(violations);
  return { since: since as Date, until };
}
