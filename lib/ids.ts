import { randomUUID } from "node:crypto";

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// RFC 9562: version nibble 4, variant bits 10xx.
const uuidV4Pattern = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** A fresh random (version 4) UUID, lower case. */
export function newId(): string {
  return randomUUID();
}

/** True for a UUID of any version in the canonical 8-4-4-4-12 form, either case. */
export function isUuid(text: unknown): text is string {
  return typeof text === "string" && uuidPattern.test(text);
}

/** True for a version-4 UUID with the RFC 9562 variant (decisions.md §3 "valid UUID v4"). */
export function isUuidV4(text: unknown): text is string {
  return typeof text === "string" && uuidV4Pattern.test(text);
}
