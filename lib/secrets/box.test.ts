import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createSecretBox, keyIdOf, SecretKeyError } from "./box.js";

describe("the secret box (AES-256-GCM, the key named in each value)", () => {
  const key = randomBytes(32);
  const box = createSecretBox(key);

  it("seals a secret so that its text is nowhere in the value, and opens it", () => {
    const secret = `whsec_${randomBytes(32).toString("base64url")}`;
    const sealed = box.seal(secret);
    expect(sealed).toMatch(new RegExp(`^enc1:${keyIdOf(key)}:[A-Za-z0-9_-]+$`));
    expect(sealed).not.toContain(secret.slice(6, 20));
    expect(box.seal(secret)).not.toBe(sealed); // a fresh IV each time
    expect(box.open(sealed)).toBe(secret);
    expect(box.isCurrent(sealed)).toBe(true);
  });

  it("refuses a value altered by one bit, and one sealed under a key it does not hold", () => {
    const sealed = box.seal("whsec_x");
    const body = Buffer.from(sealed.split(":")[2] as string, "base64url");
    body[body.length - 20] ^= 1;
    const altered = `enc1:${box.keyId}:${body.toString("base64url")}`;
    expect(() => createSecretBox(key).open(altered)).toThrow(SecretKeyError);
    expect(() => box.open(createSecretBox(randomBytes(32)).seal("whsec_x"))).toThrow(/does not hold/);
  });

  it("opens what the previous key sealed, seals under the new one only, and takes clear text from before encryption as it is", () => {
    const previous = randomBytes(32);
    const old = createSecretBox(previous).seal("whsec_old");
    const rotated = createSecretBox(randomBytes(32), previous);
    expect(rotated.open(old)).toBe("whsec_old");
    expect(rotated.isCurrent(old)).toBe(false);
    expect(rotated.isCurrent(rotated.seal("whsec_new"))).toBe(true);
    expect(rotated.open("whsec_clear")).toBe("whsec_clear");
    expect(rotated.isCurrent("whsec_clear")).toBe(false);
  });

  it("takes 32-byte keys only", () => {
    expect(() => createSecretBox(randomBytes(16))).toThrow(SecretKeyError);
    expect(() => createSecretBox(randomBytes(32), randomBytes(64))).toThrow(SecretKeyError);
  });
});
