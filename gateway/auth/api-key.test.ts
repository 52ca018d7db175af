import { describe, expect, it } from "vitest";
import { API_KEY_PREFIX, hashApiKey, isWellFormedApiKey, mintApiKey, parseBearerAuthorization } from "./api-key.js";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

describe("mintApiKey", () => {
  it("mints svc_live_ followed by 40 base62 characters", () => {
    const key = mintApiKey();
    expect(API_KEY_PREFIX).toBe("svc_live_");
    expect(key).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
    expect(isWellFormedApiKey(key)).toBe(true);
  });

  it("never mints the same key twice in 1000 tries", () => {
    const keys = new Set(Array.from({ length: 1000 }, () => mintApiKey()));
    expect(keys.size).toBe(1000);
  });

  it("draws every base62 character with equal odds (no modulo bias toward 0-7)", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 2500; i++) {
      for (const c of mintApiKey().slice(API_KEY_PREFIX.length)) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    expect(new Set(counts.keys())).toEqual(new Set(BASE62));
    // byte % 62 without rejection would make "0".."7" 25% likelier than the rest.
    const mean = (chars: string) => [...chars].reduce((sum, c) => sum + (counts.get(c) ?? 0), 0) / chars.length;
    const ratio = mean(BASE62.slice(0, 8)) / mean(BASE62.slice(8));
    expect(ratio).toBeGreaterThan(0.92);
    expect(ratio).toBeLessThan(1.08);
  });
});

describe("hashApiKey", () => {
  it("is the lower-case hex SHA-256 of the key's text", () => {
    expect(hashApiKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("is stable for one key and differs between keys", () => {
    const key = mintApiKey();
    expect(hashApiKey(key)).toBe(hashApiKey(key));
    expect(hashApiKey(key)).not.toBe(hashApiKey(mintApiKey()));
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe("isWellFormedApiKey", () => {
  const body = `${"aB3".repeat(13)}z`;
  it.each([
    ["a minted-shape key", `svc_live_${body}`, true],
    ["a body of 39 characters", `svc_live_${body.slice(1)}`, false],
    ["a body of 41 characters", `svc_live_${body}0`, false],
    ["a body with '-'", `svc_live_${body.slice(1)}-`, false],
    ["a body with '_'", `svc_live_${body.slice(1)}_`, false],
    ["another prefix", `svc_test_${body}`, false],
    ["an upper-case prefix", `SVC_LIVE_${body}`, false],
    ["a trailing newline", `svc_live_${body}\n`, false],
    ["surrounding spaces", ` svc_live_${body} `, false],
    ["the empty string", "", false],
  ])("judges %s", (_name, token, expected) => {
    expect(isWellFormedApiKey(token)).toBe(expected);
  });
});

describe("parseBearerAuthorization", () => {
  const key = mintApiKey();

  it.each([
    ["the usual form", `Bearer ${key}`],
    ["a lower-case scheme", `bearer ${key}`],
    ["an upper-case scheme", `BEARER ${key}`],
    ["several spaces after the scheme", `Bearer   ${key}`],
    ["surrounding white space", `  Bearer ${key} `],
  ])("returns the token from %s", (_name, header) => {
    expect(parseBearerAuthorization(header)).toEqual({ ok: true, token: key });
  });

  it("passes an unknown-looking token through, for the lookup to answer INVALID_API_KEY", () => {
    expect(parseBearerAuthorization("Bearer not-a-key")).toEqual({
      ok: true,
      token: "not-a-key",
    });
  });

  it.each([
    ["no header", undefined],
    ["an empty header", ""],
    ["the scheme alone", "Bearer"],
    ["the scheme and a space", "Bearer "],
    ["the scheme glued to the token", `Bearer${key}`],
    ["another scheme", `Basic ${key}`],
    ["a signing header", "FV1-HMAC-SHA256 tenant=x,ts=1,nonce=n,kid=k,sig=s"],
    ["a token with a space", `Bearer ${key} extra`],
    ["a token with a comma", `Bearer ${key},extra`],
    ["two bearer credentials", `Bearer ${key}, Bearer ${mintApiKey()}`],
    ["a bearer and another credential", `Bearer ${key}, Basic dXNlcjpwYXNz`],
  ])("answers UNAUTHENTICATED for %s", (_name, header) => {
    expect(parseBearerAuthorization(header)).toEqual({
      ok: false,
      code: "UNAUTHENTICATED",
    });
  });
});
