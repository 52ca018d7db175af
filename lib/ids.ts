import { randomBytes, randomUUID } from "node:crypto";
import { DomainError, type ErrorCode } from "./errors.js";

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Version 4 in the 13th hex digit and the RFC 9562 variant (10xx) in the 17th.
const uuidV4Pattern = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export function newId(): string {
  return randomUUID();
}

/**
 * Version 7: for busy tables that keep months of rows, a new key lands at the end of the primary key, not on
 * a random page of an index larger than memory. Not for replay ids, which the contract makes version 4.
 */
export function newTimeOrderedId(now = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Any version, canonical form, either case. */
export function isUuid(text: unknown): text is string {
  return typeof text === "string" && uuidPattern.test(text);
}

export function isUuidV4(text: unknown): text is string {
  return typeof text === "string" && uuidV4Pattern.test(text);
}

/** Any UUID version (decisions.md §3), lower case; else a DomainError with `code`. */
export function parseUuid(text: string, code: ErrorCode, what: string): string {
  if (!isUuid(text)) throw new DomainError(code, `${what} must be a UUID`);
  return text.toLowerCase();
}

/** The replay routes' ids (decisions.md §3), lower case. */
export function parseUuidV4(text: string, code: ErrorCode, what: string): string {
  if (!isUuidV4(text)) throw new DomainError(code, `${what} must be a UUID v4`);
  return text.toLowerCase();
}
