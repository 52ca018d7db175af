import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { DomainError } from "../../lib/errors.js";
import { parseUuid } from "../../lib/ids.js";
import { parseName } from "./name.js";

/** Any UUID version, lower case (decisions.md §3). */
export function parseServerId(raw: string, malformed = false): string {
  return parseUuid(malformed ? "" : raw, "INVALID_SERVER_ID", "server id");
}

export type SetupInput = { name: string; categoryId: string | null; sourceServerId: string | null };

/** In decisions.md §4's order for 400s; empty ids mean "not given". */
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

/** google.protobuf.Timestamp's range. */
const TIMESTAMP_SECONDS = { min: -62_135_596_800n, max: 253_402_300_799n };

/** Never in the future (operations.md); outside Timestamp's range INVALID_ARGUMENT, not Postgres's fault. */
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
