import { parseUuid } from "../../lib/ids.js";
import { parseName } from "./name.js";

/** A server id from a path or a request: any UUID version, returned lower case (decisions.md §3). */
export function parseServerId(raw: string, malformed = false): string {
  return parseUuid(malformed ? "" : raw, "INVALID_SERVER_ID", "server id");
}

export type SetupInput = { name: string; categoryId: string | null; sourceServerId: string | null };

/**
 * A new pending setup's request, checked in the order of decisions.md §4 for 400s: name, then
 * categoryId, then sourceServerId. Empty ids mean "not given".
 */
export function parseSetupInput(req: {
  name: string;
  categoryId: string;
  sourceServerId: string;
  malformedFields: readonly string[];
}): SetupInput {
  const malformed = new Set(req.malformedFields);
  const name = parseName(req.name, malformed.has("name"));
  const categoryId =
    req.categoryId === "" && !malformed.has("categoryId")
      ? null
      : parseUuid(malformed.has("categoryId") ? "" : req.categoryId, "INVALID_CATEGORY_ID", "categoryId");
  const sourceServerId =
    req.sourceServerId === "" && !malformed.has("sourceServerId")
      ? null
      : parseServerId(req.sourceServerId, malformed.has("sourceServerId"));
  return { name, categoryId, sourceServerId };
}

/** A check-in time: now when unset, and never in the future (operations.md `recorder checkin`). */
export function checkInTime(at: Date | undefined, now: Date): Date {
  return at === undefined || at.getTime() > now.getTime() ? now : at;
}
