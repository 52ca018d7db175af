import { randomBytes } from "node:crypto";

/** `whsec_` and 43 base64url characters: 32 random bytes (decisions.md §6), shown once at creation. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}
