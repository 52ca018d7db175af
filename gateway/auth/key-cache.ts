import type { ApiKeyIdentityRow } from "../identity/store.js";

/**
 * API-key lookups cached per gateway replica. An entry lives at most `ttlMs`: that bound is what
 * makes a revocation (or a plan change) effective everywhere within a second even if the
 * `identity.key.revoked` broadcast is late; the broadcast itself evicts at once.
 */
export type KeyCache = {
  get(keyHash: string, now: number): ApiKeyIdentityRow | undefined;
  set(keyHash: string, identity: ApiKeyIdentityRow, now: number): void;
  evict(keyHash: string): void;
};

export function createKeyCache({ ttlMs = 500, maxEntries = 10_000 } = {}): KeyCache {
  const entries = new Map<string, { identity: ApiKeyIdentityRow; expiresAt: number }>();
  return {
    get(keyHash, now) {
      const entry = entries.get(keyHash);
      if (!entry) return undefined;
      if (entry.expiresAt <= now) {
        entries.delete(keyHash);
        return undefined;
      }
      return entry.identity;
    },
    set(keyHash, identity, now) {
      // Insertion order is age order: dropping the oldest keeps memory bounded under key churn.
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(keyHash, { identity, expiresAt: now + ttlMs });
    },
    evict(keyHash) {
      entries.delete(keyHash);
    },
  };
}
