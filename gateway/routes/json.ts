import { type Timestamp, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { hasLoneSurrogate, hasNul } from "../../lib/text.js";
import { timestampIso } from "../../lib/timestamp-iso.js";

/** RFC 3339 UTC with millisecond precision and a Z suffix, or null when unset (decisions.md §1). */
export function isoOrNull(ts: Timestamp | undefined): string | null {
  return ts ? timestampIso(ts) : null;
}

/**
 * Reads an optional string field of a JSON body for an RPC request: absent or null is "" (unset);
 * any other non-string JSON type, or a string holding U+0000 or a lone surrogate, is recorded in
 * `malformed` so the service refuses that field with its own code at its turn in the validation
 * order. (No contract field can hold U+0000: Postgres cannot store it, and the services refuse it
 * generically as INVALID_ARGUMENT, so the gateway must not forward one where the field has a code
 * of its own. A lone surrogate, JSON's "\ud800", is no character at all: protobuf's UTF-8 would
 * store it as U+FFFD, a text the client never sent.)
 */
export function stringField(body: Record<string, unknown>, field: string, malformed: string[]): string {
  return optionalStringField(body, field, malformed) ?? "";
}

/** stringField for an `optional string` of the RPC request: unset (undefined) instead of "". */
export function optionalStringField(
  body: Record<string, unknown>,
  field: string,
  malformed: string[],
): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string" && !hasNul(value) && !hasLoneSurrogate(value)) return value;
  malformed.push(field);
  return undefined;
}

/**
 * A JSON value as canonical text: object keys sorted at every level, no white space. Two bodies that
 * parse to the same value (key order, spacing, `1e3` and `1000`) give the same text. Iterative, with
 * its own stack of pieces still to write: no depth of nesting can overflow the call stack.
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  // A piece is a value still to write, or text (a separator or a closing bracket) to write as it is.
  const todo: ({ value: unknown } | string)[] = [{ value }];
  for (let piece = todo.pop(); piece !== undefined; piece = todo.pop()) {
    if (typeof piece === "string") {
      out.push(piece);
      continue;
    }
    const current = piece.value;
    if (Array.isArray(current)) {
      out.push("[");
      todo.push("]");
      for (let i = current.length - 1; i >= 0; i--) {
        todo.push({ value: current[i] });
        if (i > 0) todo.push(",");
      }
    } else if (current !== null && typeof current === "object") {
      const entries = Object.entries(current as Record<string, unknown>).sort(([a], [b]) =>
        a < b ? -1 : a > b ? 1 : 0,
      );
      out.push("{");
      todo.push("}");
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, member] = entries[i] as [string, unknown];
        todo.push({ value: member }, `${JSON.stringify(key)}:`);
        if (i > 0) todo.push(",");
      }
    } else {
      out.push(JSON.stringify(current));
    }
  }
  return out.join("");
}

/**
 * True when JSON text nests arrays and objects deeper than `max`, found by a scan of its brackets
 * outside strings (before parsing, so no later walk of the value can meet an unbounded depth).
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * An optional id field of a JSON body (decisions.md §3, which §4's ids follow): null or absent is
 * not supplied, while "" is supplied and malformed, like any other value that is not an id.
 */
export function idField(body: Record<string, unknown>, field: string, malformed: string[]): string {
  const value = stringField(body, field, malformed);
  if (value === "" && body[field] === "") malformed.push(field);
  return value;
}

/**
 * An id or page token from a path or query as the service gets it: U+0000 percent-encoded again,
 * as it was sent. No id or token holds one, so its own rule still refuses it with its own code
 * (INVALID_SERVER_ID, INVALID_PAGE_TOKEN, ...) instead of the services' generic INVALID_ARGUMENT.
 */
export function escapeNul(text: string): string {
  return text.replaceAll("\u0000", "%00");
}

/** The last value of a query parameter, or undefined when it is absent. */
export function lastValue(values: string[] | undefined): string | undefined {
  return values === undefined ? undefined : (values[values.length - 1] ?? "");
}

/** An id or page token query parameter (its last value), escaped as escapeNul says; undefined when absent. */
export function queryId(values: string[] | undefined): string | undefined {
  const value = lastValue(values);
  return value === undefined ? undefined : escapeNul(value);
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

const RFC_3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * An optional RFC 3339 time of a JSON body as a protobuf Timestamp (to the millisecond): absent or
 * null is unset; anything else that is not such a time is recorded in `malformed`.
 */
export function timeField(body: Record<string, unknown>, field: string, malformed: string[]): Timestamp | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  const ms = typeof value === "string" && RFC_3339.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) {
    malformed.push(field);
    return undefined;
  }
  return timestampFromMs(ms);
}
