import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";

/** RFC 3339 UTC with millisecond precision and a Z suffix, or null when unset (decisions.md §1). */
export function isoOrNull(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

/**
 * Reads an optional string field of a JSON body for an RPC request: absent or null is "" (unset);
 * any other non-string JSON type is recorded in `malformed` so the service refuses that field with
 * its own code at its turn in the validation order.
 */
export function stringField(body: Record<string, unknown>, field: string, malformed: string[]): string {
  const value = body[field];
  if (value === undefined || value === null) return "";
  if (typeof value === "string") return value;
  malformed.push(field);
  return "";
}

/**
 * Splits a raw query into decoded pairs; "+" stays a plus (RFC 3986, as request signing reads it).
 * A name or value that does not percent-decode is kept as sent, so that its parameter's own rule
 * refuses it (`page_size=%ZZ` is INVALID_PAGE_SIZE) instead of it vanishing.
 */
export function parseQuery(rawQuery: string): Map<string, string[]> {
  const pairs = new Map<string, string[]>();
  for (const part of rawQuery.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const name = decodeOrKeep(eq === -1 ? part : part.slice(0, eq));
    const value = decodeOrKeep(eq === -1 ? "" : part.slice(eq + 1));
    pairs.set(name, [...(pairs.get(name) ?? []), value]);
  }
  return pairs;
}

function decodeOrKeep(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
