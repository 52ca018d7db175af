// The rules of a tenant's plan and name, as the identity admin service checks them.
import { DomainError } from "../../lib/errors.js";
import { hasControl, trimWhiteSpace } from "../../lib/text.js";
import type { PlanInput } from "./store.js";

/** A new tenant's plan when replayctl names no value (operations.md `tenant create`). */
export const defaultPlan: PlanInput = {
  name: "",
  serverLimit: 10,
  storageQuotaBytes: 10 * 1024 ** 3,
  rateLimitRps: 50,
  rateLimitBurst: 100,
  retentionDays: 90,
  hotDays: 30,
};

/** The longest retention a plan may set, in days (ten years). */
export const RETENTION_DAYS_MAX = 3650;

/** A plan field of a request as a number, or INVALID_ARGUMENT when it is no whole number within `min` to `max`. */
export function planField(
  value: bigint | number | undefined,
  what: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`;
    throw new DomainError("INVALID_ARGUMENT", `${what} must be a whole number ${range}`);
  }
  return n;
}

/** The plan's retention fields of a request, each checked on its own (1 to 3650, 0 to 3650 days). */
export function retentionFields(req: { retentionDays?: number; hotDays?: number }) {
  return {
    retentionDays: planField(req.retentionDays, "retention days", 1, RETENTION_DAYS_MAX),
    hotDays: planField(req.hotDays, "hot days", 0, RETENTION_DAYS_MAX),
  };
}

export const hotOverRetention = () =>
  new DomainError("INVALID_ARGUMENT", "hot days must not exceed retention days (a replay is hot within its retention)");

/**
 * A tenant's display name, cleaned as every name is (decisions.md §1, §4: Unicode White_Space
 * trimmed at both ends, nothing else) and refused with INVALID_NAME when it holds a control
 * character (the server-name rule of §1; the contract sets no other rule for tenant names, so it
 * may be empty, as an unset one is). Undefined stays unset.
 */
export function parseTenantName(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const name = trimWhiteSpace(raw);
  if (hasControl(name)) throw new DomainError("INVALID_NAME", "a tenant name must not contain control characters");
  return name;
}
