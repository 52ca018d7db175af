import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

// Secrets at rest (decisions.md §6.1): webhook subscription secrets and request-signing secrets are
// kept for HMAC, so they cannot be hashed; they are stored sealed with AES-256-GCM under
// SECRETS_KEY. A sealed value names its key, so SECRETS_KEY_PREVIOUS still opens what the key
// before sealed until `replayctl secrets reencrypt` has moved it on.

const PREFIX = "enc1";
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Opened values kept in memory: the worker opens a subscription's secret for every attempt. */
const OPENED_MAX = 10_000;

export type SecretBox = {
  /** The id of the key that seals: the first 8 hex digits of a hash of it. */
  keyId: string;
  /** `enc1:<key id>:<base64url of IV, ciphertext and tag>`. */
  seal(plain: string): string;
  /**
   * The secret a stored value holds. A value from before encryption (no `enc1:` prefix) is taken
   * as it is until it is sealed; a value sealed under a key this process lacks, or altered, throws.
   */
  open(stored: string): string;
  /** Whether the value is sealed under the current key (else reencrypt moves it on). */
  isCurrent(stored: string): boolean;
};

export class SecretKeyError extends Error {}

/** The key id of a 32-byte key. */
export function keyIdOf(key: Uint8Array): string {
  return createHash("sha256").update("replay-secrets-key:").update(key).digest("hex").slice(0, 8);
}

/** A box sealing under `key` and opening under it or `previous`. Each key is 32 bytes. */
export function createSecretBox(key: Uint8Array, previous?: Uint8Array): SecretBox {
  const keys = new Map<string, Uint8Array>();
  for (const k of [previous, key]) {
    if (k === undefined) continue;
    if (k.length !== 32) throw new SecretKeyError("a secrets key must be 32 bytes (base64 or hex)");
    keys.set(keyIdOf(k), k);
  }
  const keyId = keyIdOf(key);
  const opened = new Map<string, string>();
  return {
    keyId,
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(PREFIX));
      const sealed = Buffer.concat([iv, cipher.update(plain, "utf8"), cipher.final(), cipher.getAuthTag()]);
      return `${PREFIX}:${keyId}:${sealed.toString("base64url")}`;
    },
    open(stored) {
      if (!stored.startsWith(`${PREFIX}:`)) return stored;
      const known = opened.get(stored);
      if (known !== undefined) return known;
      const [, id, body] = stored.split(":");
      const k = id === undefined ? undefined : keys.get(id);
      if (k === undefined)
        throw new SecretKeyError(`a secret is sealed under key ${id}, which this process does not hold`);
      const bytes = Buffer.from(body ?? "", "base64url");
      if (bytes.length < IV_BYTES + TAG_BYTES) throw new SecretKeyError("a sealed secret is truncated");
      const decipher = createDecipheriv("aes-256-gcm", k, bytes.subarray(0, IV_BYTES));
      decipher.setAAD(Buffer.from(PREFIX));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      let plain: string;
      try {
        plain = Buffer.concat([
          decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)),
          decipher.final(),
        ]).toString("utf8");
      } catch {
        throw new SecretKeyError(`a secret sealed under key ${id} does not open: altered, or another key with that id`);
      }
      if (opened.size >= OPENED_MAX) opened.clear();
      opened.set(stored, plain);
      return plain;
    },
    isCurrent(stored) {
      return stored.startsWith(`${PREFIX}:${keyId}:`);
    },
  };
}
