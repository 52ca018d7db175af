import { randomBytes, randomUUID } from "node:crypto";
import { DomainError, type ErrorCode } from "./errors.js";

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Version 4 in the 13th hex digit and the RFC 9562 variant (10xx) in the 17th.
const uuidV4Pattern = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** A fresh random (version 4) UUID, lower case. */
export function newId(): string {
  return randomUUID();
}

/**
 * A fresh time-ordered (version 7, RFC 9562) UUID, lower case: the Unix time in milliseconds, then
 * random bits. For rows inserted at a high rate into a table that keeps months of them: a new key
 * lands at the end of its primary key instead of on a random page of an index larger than memory
 * (marker creates on 5 000 000 markers, npm run bench scale). Not for the replay routes' ids, which
 * the contract makes version 4.
 */
export function newTimeOrderedId(now = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** True for a UUID of any version in the canonical 8-4-4-4-12 form, either case. */
export function isUuid(text: unknown): text is string {
  return typeof text === "string" && uuidPattern.test(text);
}

/** True for a version 4 UUID with the RFC 9562 variant, in the canonical form, either case. */
export function isUuidV4(text: unknown): text is string {
  return typeof text === "string" && uuidV4Pattern.test(text);
}

/**
 * An id of any UUID version (decisions.md §3: marker targets, servers, categories), returned lower
 * case; anything else is a DomainError with the route's `code`, saying `what` must be a UUID.
 */
export function parseUuid(text: string, code: ErrorCode, what: string): string {
  if (!isUuid(text)) throw new DomainError(code, `${what} must be a UUID`);
  return text.toLowerCase();
}

/** An id that must be a UUID v4 (decisions.md §3: the replay routes), returned lower case. */
export function parseUuidV4(text: string, code: ErrorCode, what: string): string {
  if (!isUuidV4(text)) throw new DomainError(code, `${what} must be a UUID v4`);
  return text.toLowerCase();
}
