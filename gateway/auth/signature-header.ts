// The checks of a FV1-HMAC-SHA256 Authorization header that need no database, in the order
// spec/decisions.md §2 "Request signing" fixes: scheme present (UNAUTHENTICATED), tenant present
// (MISSING_TENANT), parameters well formed (INVALID_SIGNATURE). The kid, sig, ts window and nonce
// checks come after, with the store.
import { timingSafeEqual } from "node:crypto";
import { isUuid } from "../../lib/ids.js";
import { SIGNING_SCHEME } from "../../lib/signing.js";

/**
 * The parameters as sent. `tenant` keeps the client's letter case because the canonical string
 * signs it verbatim; lower-case it only to look the tenant up.
 */
export type SignatureParams = {
  tenant: string;
  /** As sent: the canonical string carries this text, and its value decides the window. */
  ts: string;
  nonce: string;
  kid: string;
  sig: string;
};

export type SignatureHeaderCode = "UNAUTHENTICATED" | "MISSING_TENANT" | "INVALID_SIGNATURE";

export type SignatureHeaderResult = { ok: true; params: SignatureParams } | { ok: false; code: SignatureHeaderCode };

const PARAM_NAMES = new Set(["tenant", "ts", "nonce", "kid", "sig"]);

// decisions.md §2: a plain decimal integer, of any length: ASCII digits and nothing else (no sign,
// space, fraction or exponent). Leading zeros are digits too: the canonical string signs the ts as
// sent, and its value decides the window (REQUEST_EXPIRED when far from now), as for any length.
const TS = /^[0-9]+$/;
const NONCE = /^[A-Za-z0-9_-]{16,64}$/;
const SIG = /^[0-9a-f]{64}$/;
// Only "non-empty" is contractual; a kid outside visible ASCII or longer than this can never be
// a minted one and would fail the lookup with the same INVALID_SIGNATURE anyway.
const KID = /^[\x21-\x7e]{1,128}$/;
// RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]. A list element
// that starts "token SP" followed by something other than "=" opens another credential.
const CREDENTIAL_START = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]+[^=\s]/;

const unauthenticated = { ok: false, code: "UNAUTHENTICATED" } as const;
const missingTenant = { ok: false, code: "MISSING_TENANT" } as const;
const invalidSignature = { ok: false, code: "INVALID_SIGNATURE" } as const;

/**
 * Parses the Authorization header of a signed request into its five parameters, or names the
 * first failing check. Parameters are comma separated `name=value` in any order, with optional
 * white space around commas and "=" (RFC 9110 BWS/OWS); names are matched case-insensitively, as
 * RFC 9110 §11.2 says for auth-param names, and empty list elements are skipped (§5.6.1).
 *
 * More than one credential is UNAUTHENTICATED (decisions §2), before the tenant check: it is
 * recognised as a list element that starts another credential ("Bearer abc", "FV1-HMAC-SHA256
 * tenant=..."), or a bare repetition of our scheme name. Node keeps only the first of repeated
 * Authorization header lines, so this is how a second credential reaches us.
 *
 * An unknown extra parameter is INVALID_SIGNATURE: it would not be covered by the signature, and
 * accepting it would let a future parameter change meaning under old clients.
 */
export function parseSignatureAuthorization(header: string | undefined): SignatureHeaderResult {
  if (header === undefined) return unauthenticated;
  const text = header.replace(/^[ \t]+|[ \t]+$/g, "");
  const space = text.search(/[ \t]/);
  const scheme = space === -1 ? text : text.slice(0, space);
  if (scheme.toLowerCase() !== SIGNING_SCHEME.toLowerCase()) {
    return unauthenticated;
  }

  const entries: Array<[string, string]> = [];
  for (const raw of space === -1 ? [] : text.slice(space).split(",")) {
    const part = raw.replace(/^[ \t]+|[ \t]+$/g, "");
    if (part === "") continue;
    if (CREDENTIAL_START.test(part) || part.toLowerCase() === SIGNING_SCHEME.toLowerCase()) {
      return unauthenticated;
    }
    // A bare name counts as present with an empty value: "tenant" alone is a malformed tenant
    // (INVALID_SIGNATURE), not a missing one.
    const eq = part.indexOf("=");
    const name = (eq === -1 ? part : part.slice(0, eq)).replace(/[ \t]+$/, "").toLowerCase();
    const value = eq === -1 ? "" : part.slice(eq + 1).replace(/^[ \t]+/, "");
    entries.push([name, value]);
  }

  if (!entries.some(([name]) => name === "tenant")) return missingTenant;

  const values = new Map<string, string>();
  for (const [name, value] of entries) {
    if (!PARAM_NAMES.has(name) || values.has(name)) return invalidSignature;
    values.set(name, value);
  }
  const tenant = values.get("tenant") ?? "";
  const ts = values.get("ts") ?? "";
  const nonce = values.get("nonce") ?? "";
  const kid = values.get("kid") ?? "";
  const sig = values.get("sig") ?? "";
  if (!isUuid(tenant) || !TS.test(ts) || !NONCE.test(nonce) || !KID.test(kid) || !SIG.test(sig)) {
    return invalidSignature;
  }
  return { ok: true, params: { tenant, ts, nonce, kid, sig } };
}

/**
 * Compares two hex strings in time that depends only on their lengths (which are public), never
 * on where they first differ. Both are padded to the longer length so timingSafeEqual always runs.
 */
export function timingSafeEqualHex(a: string, b: string): boolean {
  const left = Buffer.from(a, "utf8");
  const right = Buffer.from(b, "utf8");
  const length = Math.max(left.length, right.length);
  const paddedLeft = Buffer.alloc(length);
  const paddedRight = Buffer.alloc(length);
  left.copy(paddedLeft);
  right.copy(paddedRight);
  const same = timingSafeEqual(paddedLeft, paddedRight);
  return same && left.length === right.length;
}
