import { DomainError, type ErrorCode } from "../../lib/errors.js";
import { parseUuid } from "../../lib/ids.js";
import { codePointLength, hasControl, trimWhiteSpace } from "../../lib/text.js";
import { MARKER_ICONS } from "../../lib/vocabulary.js";

/** The most markers one replay holds (spec "Limits"). */
export const MARKERS_PER_REPLAY = 500;

/** The closed set of icon tokens (spec "Timeline marker"); nothing else is an icon. */
export const ICONS: ReadonlySet<string> = new Set(MARKER_ICONS);

const MAX_TICK = BigInt(Number.MAX_SAFE_INTEGER);
const colourPattern = /^#[0-9a-fA-F]{6}$/;

/** A replay by id, or a server's recording in progress. */
export type MarkerTarget = { replayId: string; serverId?: undefined } | { serverId: string; replayId?: undefined };

/** Unset optional fields are null. */
export type MarkerInput = {
  target: MarkerTarget;
  tick: number;
  label: string;
  category: string | null;
  colour: string | null;
  icon: string | null;
  actor: string | null;
};

/** Values as the client gave them, unset when absent or null. */
export type RawMarkerInput = {
  replayId?: string;
  serverId?: string;
  tick?: bigint;
  label?: string;
  category?: string;
  colour?: string;
  icon?: string;
  actor?: string;
  malformedFields: readonly string[];
};

/** Trimmed like names (decisions.md §1), then `min` to `max` code points, no control character. */
function parseText(raw: string, code: ErrorCode, field: string, min: number, max: number): string {
  const text = trimWhiteSpace(raw);
  const length = codePointLength(text);
  if (length < min || length > max)
    throw new DomainError(code, `${field} must be ${min > 0 ? `${min} to ` : "at most "}${max} characters`);
  if (hasControl(text)) throw new DomainError(code, `${field} must not contain control characters`);
  return text;
}

/**
 * In decisions.md §1's validation order. A field of the wrong JSON type fails with its own code at its turn;
 * a malformed replayId or serverId counts as supplied.
 */
export function parseMarkerInput(raw: RawMarkerInput): MarkerInput {
  const malformed = new Set(raw.malformedFields);
  const hasReplay = raw.replayId !== undefined || malformed.has("replayId");
  const hasServer = raw.serverId !== undefined || malformed.has("serverId");
  if (hasReplay === hasServer) throw new DomainError("INVALID_TARGET", "send exactly one of replayId and serverId");
  const target: MarkerTarget = hasReplay
    ? { replayId: parseUuid(malformed.has("replayId") ? "" : (raw.replayId ?? ""), "INVALID_REPLAY_ID", "replayId") }
    : { serverId: parseUuid(malformed.has("serverId") ? "" : (raw.serverId ?? ""), "INVALID_SERVER_ID", "serverId") };
  if (malformed.has("tick") || raw.tick === undefined || raw.tick < 0n || raw.tick > MAX_TICK)
    throw new DomainError("INVALID_TICK", "tick must be an integer from 0 to 2^53-1");
  if (malformed.has("label") || raw.label === undefined)
    throw new DomainError("INVALID_LABEL", "label must be a string of 1 to 120 characters");
  const label = parseText(raw.label, "INVALID_LABEL", "label", 1, 120);
  const optional = (field: string, value: string | undefined, code: ErrorCode, max: number) => {
    if (malformed.has(field)) throw new DomainError(code, `${field} must be a string of at most ${max} characters`);
    return value === undefined ? null : parseText(value, code, field, 0, max);
  };
  const category = optional("category", raw.category, "INVALID_CATEGORY", 60);
  if (malformed.has("colour") || (raw.colour !== undefined && !colourPattern.test(raw.colour)))
    throw new DomainError("INVALID_COLOUR", "colour must be #rrggbb");
  if (malformed.has("icon") || (raw.icon !== undefined && !ICONS.has(raw.icon)))
    throw new DomainError("INVALID_ICON", `icon must be one of ${[...ICONS].join(", ")}`);
  const actor = optional("actor", raw.actor, "INVALID_ACTOR", 80);
  return {
    target,
    tick: Number(raw.tick),
    label,
    category,
    colour: raw.colour === undefined ? null : raw.colour.toLowerCase(),
    icon: raw.icon ?? null,
    actor,
  };
}

/** Any UUID version, lower case. */
export function parseMarkerId(raw: string): string {
  return parseUuid(raw, "INVALID_MARKER_ID", "marker id");
}

/** Any UUID version, lower case (decisions.md §3). */
export function parseReplayId(raw: string): string {
  return parseUuid(raw, "INVALID_REPLAY_ID", "replay id");
}
