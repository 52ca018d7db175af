import { readRetryingConnectionLoss } from "../../lib/db/errors.js";
import type { Queryable } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { logger } from "../../lib/log.js";
import type { SecretBox } from "../../lib/secrets/box.js";
import { canonicalQuery, canonicalString, hmacSha256Hex, sha256Hex } from "../../lib/signing.js";
import type { ApiKeyIdentityRow } from "../identity/store.js";
import * as store from "../identity/store.js";
import { hashApiKey, isWellFormedApiKey, parseBearerAuthorization } from "./api-key.js";
import type { KeyCache } from "./key-cache.js";
import { parseSignatureAuthorization, timingSafeEqualHex } from "./signature-header.js";

/** decisions.md §2: `ts` more than 300 000 ms from server time is REQUEST_EXPIRED. */
export const SIGNATURE_WINDOW_MS = 300_000;

export type SignedRequest = {
  authorization: string | undefined;
  method: string;
  path: string;
  rawQuery: string;
  body: Uint8Array | undefined;
};

export type Authenticator = {
  /** Resolves a bearer API key; throws UNAUTHENTICATED or INVALID_API_KEY. */
  apiKey(authorization: string | undefined): Promise<ApiKeyIdentityRow>;
  /** Verifies an FV1-HMAC-SHA256 signed request and uses up its nonce; returns the tenant id. */
  signature(req: SignedRequest): Promise<string>;
};

/**
 * The signing key's secret, or undefined when no key of this process opens it (SECRETS_KEY
 * misconfigured): logged for the operator, answered as a signature that does not match.
 */
const log = logger("gateway:auth");

function openedSecret(secrets: Pick<SecretBox, "open">, kid: string, stored: string): string | undefined {
  try {
    return secrets.open(stored);
  } catch (err) {
    log.error(
      { kid, err: String(err) },
      "a signing key's secret cannot be opened: is SECRETS_KEY the one that sealed it?",
    );
    return undefined;
  }
}

export function createAuthenticator(deps: {
  db: Queryable;
  keyCache: KeyCache;
  now: () => number;
  /** Opens the signing keys' secrets, stored sealed (lib/secrets/box.ts). */
  secrets: Pick<SecretBox, "open">;
}): Authenticator {
  const { db, keyCache, now } = deps;
  return {
    async apiKey(authorization) {
      const bearer = parseBearerAuthorization(authorization);
      if (!bearer.ok) throw new DomainError("UNAUTHENTICATED", "send Authorization: Bearer <API key>");
      // A token that cannot be a key is refused without a lookup, with the same answer as an unknown key.
      if (!isWellFormedApiKey(bearer.token)) throw new DomainError("INVALID_API_KEY", "the API key is not valid");
      const keyHash = hashApiKey(bearer.token);
      const cached = keyCache.get(keyHash, now());
      if (cached) return cached;
      const identity = await readRetryingConnectionLoss(() => store.findApiKeyIdentityByHash(db, keyHash));
      if (!identity) throw new DomainError("INVALID_API_KEY", "the API key is not valid");
      keyCache.set(keyHash, identity, now());
      return identity;
    },

    // The checks run in decisions.md §2's order; the first failure answers, and only a request
    // that passes every check uses up its nonce.
    async signature(req) {
      const parsed = parseSignatureAuthorization(req.authorization);
      if (!parsed.ok) {
        const detail = {
          UNAUTHENTICATED: "send Authorization: FV1-HMAC-SHA256 tenant=...,ts=...,nonce=...,kid=...,sig=...",
          MISSING_TENANT: "the signature has no tenant parameter",
          INVALID_SIGNATURE: "the signature parameters are malformed",
        }[parsed.code];
        throw new DomainError(parsed.code, detail);
      }
      const { tenant, ts, nonce, kid, sig } = parsed.params;
      const tenantId = tenant.toLowerCase();
      const key = await readRetryingConnectionLoss(() => store.findSigningKeyByKid(db, kid));
      // canonicalQuery takes the query as URL.search has it and drops one leading "?": the query
      // after the URL's first "?" may begin with another, which is part of what was signed.
      const query = canonicalQuery(`?${req.rawQuery}`);
      const invalid = () => new DomainError("INVALID_SIGNATURE", "the signature does not match the request");
      if (!key || key.tenant_id !== tenantId || query === undefined) throw invalid();
      const secret = openedSecret(deps.secrets, kid, key.secret);
      if (secret === undefined) throw invalid();
      const expected = hmacSha256Hex(
        secret,
        canonicalString({
          tenant,
          ts,
          nonce,
          kid,
          method: req.method,
          path: req.path,
          query,
          bodySha256: sha256Hex(req.body ?? ""),
        }),
      );
      if (!timingSafeEqualHex(expected, sig)) throw invalid();
      // A ts of any length parses; one beyond 2^53 is far outside the window whatever its rounding.
      const tsMs = Number(ts);
      if (!(Math.abs(now() - tsMs) <= SIGNATURE_WINDOW_MS)) {
        throw new DomainError("REQUEST_EXPIRED", "ts is more than 300 seconds from the server's time");
      }
      // Remembered for a whole window from the later of its ts and now: a replay of the request is
      // REQUEST_EXPIRED after its own window, and a fresh ts reusing the nonce still finds it.
      const keepUntil = Math.max(tsMs, now()) + SIGNATURE_WINDOW_MS + 1000;
      const fresh = await store.insertNonce(db, kid, nonce, new Date(keepUntil));
      if (!fresh) throw new DomainError("NONCE_REUSED", "this nonce was already used with this key");
      return tenantId;
    },
  };
}
