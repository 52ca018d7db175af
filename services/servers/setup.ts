import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { DomainError } from "../../lib/errors.js";
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

/** The range of google.protobuf.Timestamp: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z. */
const TIMESTAMP_SECONDS = { min: -62_135_596_800n, max: 253_402_300_799n };

/**
 * A check-in time: now when unset, and never in the future (operations.md `recorder checkin`). A
 * value outside Timestamp's own range (or with nanos outside 0..999 999 999) is refused as
 * INVALID_ARGUMENT: Postgres would refuse it as a fault of ours.
 */
export function checkInTime(at: Timestamp | undefined, now: Date): Date {
  if (at === undefined) return now;
  if (
    at.seconds < TIMESTAMP_SECONDS.min ||
    at.seconds > TIMESTAMP_SECONDS.max ||
    at.nanos < 0 ||
    at.nanos > 999_999_999
  ) {
    throw new DomainError("INVALID_ARGUMENT", "at must be a timestamp between 0001-01-01 and 9999-12-31");
  }
  const date = timestampDate(at);
  return date.getTime() > now.getTime() ? now : date;
}
