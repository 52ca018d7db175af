import type { Flag } from "./command.js";
import { usageError } from "./output.js";

// Flag parsers for the command tables. Each refuses a bad value naming the flag; the server
// re-validates ranges.

export function text(hint: string): Flag<string, false> {
  return { hint, required: false, parse: (raw) => raw };
}

export function required<T>(flag: Flag<T>): Flag<T, true> {
  return { ...flag, required: true };
}

const INT64_MAX = 2n ** 63n - 1n;
const INT32_MAX = 2 ** 31 - 1;

function integer(raw: string, name: string, min: bigint, max: bigint): bigint {
  if (!/^[+-]?\d+$/.test(raw)) throw usageError(`--${name} must be an integer, got "${raw}"`);
  const value = BigInt(raw);
  if (value < min || value > max) throw usageError(`--${name} must be between ${min} and ${max}, got ${raw}`);
  return value;
}

export function int64(min: bigint): Flag<bigint, false> {
  return { hint: "N", required: false, parse: (raw, name) => integer(raw, name, min, INT64_MAX) };
}

export function int32(min: number, max = INT32_MAX): Flag<number, false> {
  return {
    hint: "N",
    required: false,
    parse: (raw, name) => Number(integer(raw, name, BigInt(min), BigInt(max))),
  };
}

export function bool(): Flag<boolean, false> {
  return {
    hint: "true|false",
    required: false,
    parse: (raw, name) => {
      if (raw === "true") return true;
      if (raw === "false") return false;
      throw usageError(`--${name} must be true or false, got "${raw}"`);
    },
  };
}

export function choice<E>(choices: Record<string, E>): Flag<E, false> {
  const names = Object.keys(choices);
  return {
    hint: names.join("|"),
    required: false,
    parse: (raw, name) => {
      if (!Object.hasOwn(choices, raw)) throw usageError(`--${name} must be one of ${names.join(", ")}, got "${raw}"`);
      return choices[raw] as E;
    },
  };
}

export function list(hint: string): Flag<string[], false> {
  return {
    hint,
    required: false,
    parse: (raw) =>
      raw
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item !== ""),
  };
}

// RFC 3339 date-time: T or space between date and time, optional fraction, Z or a numeric offset.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/** Parses an RFC 3339 date-time, refusing impossible dates that Date would silently roll over. */
export function parseRfc3339(raw: string): Date | undefined {
  const m = RFC3339.exec(raw);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ms = Number((m[7] ?? "").padEnd(3, "0").slice(0, 3));
  const offsetMinutes = m[8] ? 0 : (m[9] === "-" ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11]));
  if (hour > 23 || minute > 59 || second > 59 || Number(m[10] ?? 0) > 23 || Number(m[11] ?? 0) > 59) return undefined;
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day);
  if (local.getUTCFullYear() !== year || local.getUTCMonth() !== month - 1 || local.getUTCDate() !== day)
    return undefined;
  local.setUTCHours(hour, minute, second, ms);
  return new Date(local.getTime() - offsetMinutes * 60_000);
}

export function time(): Flag<Date, false> {
  return {
    hint: "RFC3339",
    required: false,
    parse: (raw, name) => {
      const date = parseRfc3339(raw);
      if (!date) throw usageError(`--${name} must be an RFC 3339 date-time such as 2024-05-01T12:00:00Z, got "${raw}"`);
      return date;
    },
  };
}

/** The page a list command asks for (the admin API's List RPCs): its size and the token to resume at. */
export const pageFlags = { "page-size": int32(1), "page-token": text("P") };

/** The page fields of a List request: unset ones take the service's defaults. */
export function pageOf(v: { "page-size"?: number; "page-token"?: string }) {
  return { pageSize: v["page-size"], pageToken: v["page-token"] ?? "" };
}

/** The replay a lifecycle command acts on. */
export const replayFlag = { replay: required(text("R")) };
