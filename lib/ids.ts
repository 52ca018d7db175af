import { randomUUID } from "node:crypto";

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A fresh random (version 4) UUID, lower case. */
export function newId(): string {
  return randomUUID();
}

/** True for a UUID of any version in the canonical 8-4-4-4-12 form, either case. */
export function isUuid(text: unknown): text is string {
  return typeof text === "string" && uuidPattern.test(text);
}
