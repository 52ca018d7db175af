// FV1-HMAC-SHA256 request signing (spec/decisions.md §2 "Request signing"), a copy of the service's
// lib/signing.ts so that this package stands alone. The root's test/client-package.test.ts signs the
// same inputs with both and fails when they differ.
import { createHash, createHmac, randomBytes } from "node:crypto";

export const SIGNING_SCHEME = "FV1-HMAC-SHA256";

/** The tenant's signing key as `replayctl` prints it. */
export type SigningKey = { tenant: string; kid: string; secret: string };

export type SignRequestInput = SigningKey & {
  method: string;
  /** The absolute URL that will be sent; its path and query are signed as the URL serialises them. */
  url: string | URL;
  /** The exact body bytes (a string is taken as UTF-8); no body signs the empty string's hash. */
  body?: Uint8Array | string;
  /** Unix milliseconds; defaults to now. */
  ts?: number;
  /** 16 to 64 of [A-Za-z0-9_-], never reused for one kid; defaults to 24 random base64url characters. */
  nonce?: string;
};

export type SignedRequest = { authorization: string; ts: number; nonce: string; sig: string };

/** RFC 3986 percent-encoding: all but A-Z a-z 0-9 - . _ ~ as UTF-8 bytes in upper-case hex. */
export function rfc3986Encode(text: string): string {
  // encodeURIComponent leaves ! ' ( ) * alone, but RFC 3986 counts them as reserved.
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The canonical query line: pairs split on "&", each side percent-decoded ("+" stays a plus) and
 * re-encoded per RFC 3986, sorted by name then value comparing the encoded strings, joined by "&".
 * Undefined when a part does not percent-decode (the server could never verify it).
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
  pairs.sort((a, b) => compareCodeUnits(a[0], b[0]) || compareCodeUnits(a[1], b[1]));
  return pairs.map(([name, value]) => `${name}=${value}`).join("&");
}

/** Signs one request: the Authorization header value with the ts, nonce and sig that went into it. */
export function signRequest(input: SignRequestInput): SignedRequest {
  const ts = input.ts ?? Date.now();
  // 18 bytes are exactly 24 base64url characters, inside the contract's 16 to 64.
  const nonce = input.nonce ?? randomBytes(18).toString("base64url");
  const url = new URL(input.url);
  const query = canonicalQuery(url.search);
  if (query === undefined) throw new URIError(`query does not percent-decode: ${url.search}`);
  const canonical = [
    SIGNING_SCHEME,
    input.tenant,
    String(ts),
    nonce,
    input.kid,
    input.method.toUpperCase(),
    url.pathname,
    query,
    createHash("sha256")
      .update(input.body ?? "")
      .digest("hex"),
  ].join("\n");
  const sig = createHmac("sha256", Buffer.from(input.secret, "utf8")).update(canonical, "utf8").digest("hex");
  const authorization = `${SIGNING_SCHEME} tenant=${input.tenant},ts=${ts},nonce=${nonce},kid=${input.kid},sig=${sig}`;
  return { authorization, ts, nonce, sig };
}
