// The pure half of bearer API keys (spec/decisions.md §2 "API keys"): minting, hashing and
// reading the Authorization header. Looking a hash up and checking revocation is the store's job.
import { hash, randomBytes } from "node:crypto";

export const API_KEY_PREFIX = "svc_live_";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KEY_BODY_LENGTH = 40;
// 248 = 4 * 62: bytes from 248 up are thrown away so that byte % 62 is uniform.
const UNBIASED_BYTE_LIMIT = 256 - (256 % BASE62.length);
const API_KEY = /^svc_live_[0-9A-Za-z]{40}$/;

export type BearerAuthorizationResult = { ok: true; token: string } | { ok: false; code: "UNAUTHENTICATED" };

/** A fresh key: the prefix and 40 uniformly random base62 characters (about 238 bits). */
export function mintApiKey(): string {
  let body = "";
  while (body.length < KEY_BODY_LENGTH) {
    for (const byte of randomBytes(KEY_BODY_LENGTH)) {
      if (byte >= UNBIASED_BYTE_LIMIT) continue;
      body += BASE62[byte % BASE62.length];
      if (body.length === KEY_BODY_LENGTH) break;
    }
  }
  return API_KEY_PREFIX + body;
}

/**
 * The only form in which a key is stored: lower-case hex SHA-256 of its text. One-shot `hash`, not
 * a Hash object: a third of the cost, and it runs on every request.
 */
export function hashApiKey(key: string): string {
  return hash("sha256", key, "hex");
}

/** Whether a token has the shape of a minted key; anything else cannot be a known key. */
export function isWellFormedApiKey(token: string): boolean {
  return API_KEY.test(token);
}

/**
 * Reads `Bearer <token>` (scheme case-insensitive, RFC 9110). No header, another scheme, an empty
 * token or more than one credential is UNAUTHENTICATED (decisions §2). A bearer token is a single
 * token68 (RFC 6750), so white space or a comma after the scheme means a second credential or
 * parameters, never part of a key. Whether the token is a known key is INVALID_API_KEY, later.
 */
export function parseBearerAuthorization(header: string | undefined): BearerAuthorizationResult {
  if (header === undefined) return { ok: false, code: "UNAUTHENTICATED" };
  const text = header.replace(/^[ \t]+|[ \t]+$/g, "");
  const match = /^([^ \t]+)[ \t]+(.+)$/.exec(text);
  if (match === null) return { ok: false, code: "UNAUTHENTICATED" };
  const [, scheme = "", token = ""] = match;
  if (scheme.toLowerCase() !== "bearer" || /[\s,]/.test(token)) {
    return { ok: false, code: "UNAUTHENTICATED" };
  }
  return { ok: true, token };
}
