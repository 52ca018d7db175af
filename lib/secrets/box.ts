import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

// Secrets at rest (decisions.md §6.1) are kept for HMAC, so they are sealed, not hashed. A sealed value
// names its key, so the previous key still opens it until `replayctl secrets reencrypt` moves it on.

const PREFIX = "enc1";
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Opened values kept in memory: the worker opens a subscription's secret for every attempt. */
const OPENED_MAX = 10_000;

export type SecretBox = {
  keyId: string;
  /** `enc1:<key id>:<base64url of IV, ciphertext and tag>`. */
  seal(plain: string): string;
  /** A value from before encryption is taken as it is; one under an unknown key, or altered, throws. */
  open(stored: string): string;
  isCurrent(stored: string): boolean;
};

export class SecretKeyError extends Error {}

export function keyIdOf(key: Uint8Array): string {
  return createHash("sha256").update("replay-secrets-key:").update(key).digest("hex").slice(0, 8);
}

/** Seals under `key`, opens under it or `previous`. */
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
