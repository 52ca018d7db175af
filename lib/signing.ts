// FV1-HMAC-SHA256 request signing (spec/decisions.md §2 "Request signing"). The gateway verifies
// with the same canonicalisation that clients sign with, so the two can never drift apart.
import { createHash, createHmac, randomBytes } from "node:crypto";

export const SIGNING_SCHEME = "FV1-HMAC-SHA256";

/** The inputs of the nine-line canonical string, in the order they appear in it. */
export type CanonicalInput = {
  tenant: string;
  ts: number | string;
  nonce: string;
  kid: string;
  method: string;
  path: string;
  query: string;
  bodySha256: string;
};

export type SignRequestInput = {
  tenant: string;
  kid: string;
  secret: string;
  method: string;
  /** The absolute URL that will be sent; its path and query are signed as the URL serialises them. */
  url: string | URL;
  /** The exact body bytes (a string is taken as UTF-8); no body signs the empty string's hash. */
  body?: Uint8Array | string;
  ts?: number;
  nonce?: string;
};

export type SignedRequest = {
  authorization: string;
  ts: number;
  nonce: string;
  sig: string;
};

/** Everything but RFC 3986's unreserved set, as UTF-8 in upper-case hex; URIError on a lone surrogate. */
export function rfc3986Encode(text: string): string {
  // encodeURIComponent leaves ! ' ( ) * alone, but RFC 3986 counts them as reserved.
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Each side percent-decoded ("+" stays a plus), re-encoded per RFC 3986, sorted by name then value.
 * Undefined when a part does not decode: such a query cannot have been signed (INVALID_SIGNATURE).
 */
export function canonicalQuery(rawQuery: string): string | undefined {
  const query = rawQuery.startsWith("?") ? rawQuery.slice(1) : rawQuery;
  const pairs: Array<[string, string]> = [];
  for (const part of query.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const name = eq === -1 ? part : part.slice(0, eq);
    const value = eq === -1 ? "" : part.slice(eq + 1);
    try {
      pairs.push([rfc3986Encode(decodeURIComponent(name)), rfc3986Encode(decodeURIComponent(value))]);
    } catch (err) {
      if (err instanceof URIError) return undefined;
      throw err;
    }
  }
  // Sorting the encoded forms keeps the order independent of how a client chose to escape.
  pairs.sort((a, b) => compareCodeUnits(a[0], b[0]) || compareCodeUnits(a[1], b[1]));
  return pairs.map(([name, value]) => `${name}=${value}`).join("&");
}

/** The nine-line canonical string: lines joined by "\n", no trailing newline, method upper-cased. */
export function canonicalString(input: CanonicalInput): string {
  return [
    SIGNING_SCHEME,
    input.tenant,
    String(input.ts),
    input.nonce,
    input.kid,
    input.method.toUpperCase(),
    input.path,
    input.query,
    input.bodySha256,
  ].join("\n");
}

/** Lower-case hex SHA-256; a string is hashed as its UTF-8 bytes. */
export function sha256Hex(bytes: Uint8Array | string): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Lower-case hex HMAC-SHA256 keyed with the secret's UTF-8 bytes (the secret as replayctl prints it). */
export function hmacSha256Hex(secret: string, text: string): string {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(text, "utf8").digest("hex");
}

/** ts defaults to now (unix ms), nonce to 24 random base64url characters. */
export function signRequest(input: SignRequestInput): SignedRequest {
  const ts = input.ts ?? Date.now();
  // 18 bytes are exactly 24 base64url characters, inside the contract's 16 to 64.
  const nonce = input.nonce ?? randomBytes(18).toString("base64url");
  const url = new URL(input.url);
  const query = canonicalQuery(url.search);
  // The gateway could never verify such a query (it answers INVALID_SIGNATURE), so fail loudly here.
  if (query === undefined) {
    throw new URIError(`query does not percent-decode: ${url.search}`);
  }
  const canonical = canonicalString({
    tenant: input.tenant,
    ts,
    nonce,
    kid: input.kid,
    method: input.method,
    path: url.pathname,
    query,
    bodySha256: sha256Hex(input.body ?? ""),
  });
  const sig = hmacSha256Hex(input.secret, canonical);
  const authorization = `${SIGNING_SCHEME} tenant=${input.tenant},ts=${ts},nonce=${nonce},kid=${input.kid},sig=${sig}`;
  return { authorization, ts, nonce, sig };
}
