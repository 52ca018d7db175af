import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { canonicalQuery, canonicalString, hmacSha256Hex, sha256Hex, signRequest } from "../../lib/signing.js";
import { parseSignatureAuthorization, timingSafeEqualHex } from "./signature-header.js";

const REFERENCE = new URL("../../../shared/conformance/lib/signing.mjs", import.meta.url);
const hasReference = existsSync(fileURLToPath(REFERENCE));

type Reference = {
  signRequest(input: {
    tenant: string;
    kid: string;
    secret: string;
    method: string;
    url: string;
    ts?: number;
    nonce?: string;
  }): {
    authorization: string;
    ts: number;
    nonce: string;
    sig: string;
  };
  formatSignatureHeader(
    params: Record<string, string | number>,
    options?: { order?: string[]; spaces?: boolean; scheme?: string },
  ): string;
};

const SIG = "0123456789abcdef".repeat(4);
const NONCE = "AbCdEfGh_-123456";

// A fresh, valid parameter set per test; ids are never hard-coded.
function validParams(): Record<string, string> {
  return {
    tenant: randomUUID(),
    ts: "1700000000000",
    nonce: NONCE,
    kid: randomUUID(),
    sig: SIG,
  };
}

function header(params: Record<string, string>, { scheme = "FV1-HMAC-SHA256", separator = "," } = {}): string {
  return `${scheme} ${Object.entries(params)
    .map(([name, value]) => `${name}=${value}`)
    .join(separator)}`;
}

function without(name: string): Record<string, string> {
  const params = validParams();
  delete params[name];
  return params;
}

function withValue(name: string, value: string): Record<string, string> {
  return { ...validParams(), [name]: value };
}

describe("parseSignatureAuthorization: accepted headers", () => {
  it("returns the five parameters, ts and tenant as sent", () => {
    const params = validParams();
    expect(parseSignatureAuthorization(header(params))).toEqual({
      ok: true,
      params: {
        tenant: params.tenant,
        ts: "1700000000000",
        nonce: NONCE,
        kid: params.kid,
        sig: SIG,
      },
    });
  });

  it("takes a plain decimal ts of any length, leading zeros included (the window, not the parser, refuses a far one)", () => {
    for (const ts of ["1700000000000000", "9".repeat(40), "01700000000000", "0", "0000"]) {
      const parsed = parseSignatureAuthorization(header({ ...validParams(), ts }));
      expect(parsed.ok && parsed.params.ts, ts).toBe(ts);
    }
  });

  const accepted: Array<[string, () => string]> = [
    ["parameters in any order", () => header(Object.fromEntries(Object.entries(validParams()).reverse()))],
    ["spaces after commas", () => header(validParams(), { separator: ", " })],
    ["the scheme in lower case", () => header(validParams(), { scheme: "fv1-hmac-sha256" })],
    ["the scheme in mixed case", () => header(validParams(), { scheme: "Fv1-Hmac-Sha256" })],
    ["several spaces after the scheme", () => header(validParams(), { scheme: "FV1-HMAC-SHA256  " })],
    ["an upper-case tenant UUID", () => header(withValue("tenant", randomUUID().toUpperCase()))],
    ["a ts of 0 (the window check rejects it later)", () => header(withValue("ts", "0"))],
    ["a 15-digit ts", () => header(withValue("ts", "999999999999999"))],
    ["a 16-character nonce", () => header(withValue("nonce", "a".repeat(16)))],
    ["a 64-character nonce", () => header(withValue("nonce", "Z9_-".repeat(16)))],
    [
      "upper-case parameter names (RFC 9110)",
      () => header(Object.fromEntries(Object.entries(validParams()).map(([n, v]) => [n.toUpperCase(), v]))),
    ],
    ["a trailing comma (empty list element)", () => `${header(validParams())},`],
    ["white space around '=' (RFC 9110 BWS)", () => header(validParams(), { separator: " , " }).replace(/=/g, " = ")],
  ];
  it.each(accepted)("accepts %s", (_name, build) => {
    expect(parseSignatureAuthorization(build()).ok).toBe(true);
  });

  it("keeps the tenant's letter case, since the canonical string signs it verbatim", () => {
    const tenant = randomUUID().toUpperCase();
    const result = parseSignatureAuthorization(header(withValue("tenant", tenant)));
    expect(result.ok && result.params.tenant).toBe(tenant);
  });
});

describe("parseSignatureAuthorization: UNAUTHENTICATED", () => {
  const cases: Array<[string, () => string | undefined]> = [
    ["no header", () => undefined],
    ["an empty header", () => ""],
    ["a bearer key", () => "Bearer svc_live_0123456789012345678901234567890123456789"],
    [
      "another signing scheme",
      () =>
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=abc",
    ],
    ["a scheme that only starts like ours", () => header(validParams(), { scheme: "FV1-HMAC-SHA256X" })],
    ["a scheme glued to its parameters", () => `FV1-HMAC-SHA256,${header(validParams()).slice(16)}`],
    ["a second credential after ours", () => `${header(validParams())}, Bearer abc`],
    ["a second credential before ours", () => `Bearer abc, ${header(validParams())}`],
    ["our credential twice", () => `${header(validParams())}, ${header(validParams())}`],
    ["our scheme repeated bare", () => `${header(validParams())}, FV1-HMAC-SHA256`],
    ["a token68 credential after ours", () => `${header(validParams())},Basic dXNlcjpwYXNz`],
    ["a second credential and no tenant (scheme check first)", () => `${header(without("tenant"))}, Bearer abc`],
  ];
  it.each(cases)("refuses %s", (_name, build) => {
    expect(parseSignatureAuthorization(build())).toEqual({
      ok: false,
      code: "UNAUTHENTICATED",
    });
  });
});

describe("parseSignatureAuthorization: MISSING_TENANT", () => {
  const cases: Array<[string, () => string]> = [
    ["the scheme alone", () => "FV1-HMAC-SHA256"],
    ["the scheme and trailing spaces", () => "FV1-HMAC-SHA256   "],
    ["every parameter but tenant", () => header(without("tenant"))],
    [
      "no tenant and otherwise malformed parameters (tenant check first)",
      () => header({ ...without("tenant"), ts: "soon", sig: "x", extra: "1" }),
    ],
    ["no tenant and a duplicate parameter", () => `${header(without("tenant"))},ts=1`],
    ["a differently named parameter", () => header({ ...without("tenant"), tenants: randomUUID() })],
  ];
  it.each(cases)("answers MISSING_TENANT for %s", (_name, build) => {
    expect(parseSignatureAuthorization(build())).toEqual({
      ok: false,
      code: "MISSING_TENANT",
    });
  });
});

describe("parseSignatureAuthorization: INVALID_SIGNATURE", () => {
  const cases: Array<[string, () => string]> = [
    ["a duplicate ts", () => `${header(validParams())},ts=1700000000000`],
    [
      "a duplicate tenant with the same value",
      () => {
        const params = validParams();
        return `${header(params)},tenant=${params.tenant}`;
      },
    ],
    ["a duplicate that differs only in name case", () => `${header(validParams())},SIG=${SIG}`],
    ["an unknown extra parameter", () => `${header(validParams())},extra=1`],
    ["a parameter with an empty name", () => `${header(validParams())},=x`],
    ["a bare word among the parameters", () => `${header(validParams())},garbage`],
    ["a bare tenant name (present, empty)", () => header(without("tenant")).replace("ts=", "tenant,ts=")],
    ["an empty tenant", () => header(withValue("tenant", ""))],
    ["a tenant that is not a UUID", () => header(withValue("tenant", "acme"))],
    ["a tenant UUID without hyphens", () => header(withValue("tenant", randomUUID().replace(/-/g, "")))],
    ["a tenant UUID in braces", () => header(withValue("tenant", `{${randomUUID()}}`))],
    ["a tenant UUID with an extra digit", () => header(withValue("tenant", `${randomUUID()}0`))],
    ["a tenant UUID with a non-hex digit", () => header(withValue("tenant", `g${randomUUID().slice(1)}`))],
    ["a missing ts", () => header(without("ts"))],
    ["an empty ts", () => header(withValue("ts", ""))],
    ["a ts in words", () => header(withValue("ts", "now"))],
    ["a negative ts", () => header(withValue("ts", "-1700000000000"))],
    ["a ts with a plus sign", () => header(withValue("ts", "+1700000000000"))],
    ["a fractional ts", () => header(withValue("ts", "1700000000000.5"))],
    ["a ts in exponent form", () => header(withValue("ts", "1.7e12"))],
    ["a hexadecimal ts", () => header(withValue("ts", "0x18BCFE56800"))],
    ["a ts with an inner space", () => header(withValue("ts", "17000 00000000"))],
    ["a ts in non-ASCII digits", () => header(withValue("ts", "١٧٠٠٠٠٠٠٠٠٠٠٠"))],
    ["a ts with a unit", () => header(withValue("ts", "1700000000000ms"))],
    ["a missing nonce", () => header(without("nonce"))],
    ["an empty nonce", () => header(withValue("nonce", ""))],
    ["a 15-character nonce", () => header(withValue("nonce", "a".repeat(15)))],
    ["a 65-character nonce", () => header(withValue("nonce", "a".repeat(65)))],
    ["a nonce with base64 '+' and '/'", () => header(withValue("nonce", "abcd+efgh/ijklmnop"))],
    ["a nonce with padding", () => header(withValue("nonce", "abcdefghijklmnop=="))],
    ["a nonce with a dot", () => header(withValue("nonce", "abcdefgh.ijklmnop"))],
    ["a nonce with a tilde", () => header(withValue("nonce", "abcdefgh~ijklmnop"))],
    ["a nonce with a non-ASCII letter", () => header(withValue("nonce", "abcdefghijklmnoé"))],
    ["a duplicate nonce", () => `${header(validParams())},nonce=${"n".repeat(16)}`],
    ["a duplicate kid", () => `${header(validParams())},kid=k`],
    ["a missing kid", () => header(without("kid"))],
    ["an empty kid", () => header(withValue("kid", ""))],
    ["a missing sig", () => header(without("sig"))],
    ["an empty sig", () => header(withValue("sig", ""))],
    ["an upper-case hex sig", () => header(withValue("sig", SIG.toUpperCase()))],
    ["a 63-character sig", () => header(withValue("sig", SIG.slice(1)))],
    ["a 65-character sig", () => header(withValue("sig", `${SIG}0`))],
    ["a sig with a non-hex character", () => header(withValue("sig", `${SIG.slice(1)}g`))],
    ["a quoted value", () => header(withValue("nonce", `"${NONCE}"`))],
  ];
  it.each(cases)("answers INVALID_SIGNATURE for %s", (_name, build) => {
    expect(parseSignatureAuthorization(build())).toEqual({
      ok: false,
      code: "INVALID_SIGNATURE",
    });
  });
});

describe("parseSignatureAuthorization with our signing helper", () => {
  it("parses what signRequest produces, and the rebuilt canonical string verifies the sig", () => {
    const tenant = randomUUID();
    const kid = randomUUID();
    const secret = "topsecret";
    const url = new URL("https://gw.example/v1/replays?page_size=5&b=%2b");
    const signed = signRequest({ tenant, kid, secret, method: "GET", url });
    const result = parseSignatureAuthorization(signed.authorization);
    if (!result.ok) throw new Error(`refused: ${result.code}`);
    const canonical = canonicalString({
      ...result.params,
      method: "GET",
      path: url.pathname,
      query: canonicalQuery(url.search) ?? "",
      bodySha256: sha256Hex(""),
    });
    expect(timingSafeEqualHex(hmacSha256Hex(secret, canonical), result.params.sig)).toBe(true);
    expect(timingSafeEqualHex(hmacSha256Hex(`${secret}x`, canonical), result.params.sig)).toBe(false);
  });
});

describe.skipIf(!hasReference)("parseSignatureAuthorization with the conformance reference", () => {
  async function loadReference(): Promise<Reference> {
    return (await import(REFERENCE.href)) as Reference;
  }

  it("accepts the reference's signed header and returns its parameters", async () => {
    const reference = await loadReference();
    const tenant = randomUUID();
    const kid = randomUUID();
    const signed = reference.signRequest({
      tenant,
      kid,
      secret: "s",
      method: "GET",
      url: "https://gw.example/v1/replays",
    });
    expect(parseSignatureAuthorization(signed.authorization)).toEqual({
      ok: true,
      params: {
        tenant,
        ts: String(signed.ts),
        nonce: signed.nonce,
        kid,
        sig: signed.sig,
      },
    });
  });

  it("accepts every layout the reference can format (order, spaces)", async () => {
    const reference = await loadReference();
    const params = {
      tenant: randomUUID(),
      ts: Date.now(),
      nonce: NONCE,
      kid: randomUUID(),
      sig: SIG,
    };
    const orders = [
      ["tenant", "ts", "nonce", "kid", "sig"],
      ["sig", "kid", "nonce", "ts", "tenant"],
      ["nonce", "tenant", "sig", "ts", "kid"],
    ];
    for (const order of orders) {
      for (const spaces of [false, true]) {
        expect(parseSignatureAuthorization(reference.formatSignatureHeader(params, { order, spaces })).ok).toBe(true);
      }
    }
  });

  it("classifies the reference's deliberately wrong headers as the contract says", async () => {
    const reference = await loadReference();
    const params = {
      tenant: randomUUID(),
      ts: Date.now(),
      nonce: NONCE,
      kid: randomUUID(),
      sig: SIG,
    };
    const { tenant: _tenant, ...noTenant } = params;
    expect(parseSignatureAuthorization(reference.formatSignatureHeader(noTenant))).toEqual({
      ok: false,
      code: "MISSING_TENANT",
    });
    expect(
      parseSignatureAuthorization(
        reference.formatSignatureHeader(params, {
          scheme: "AWS4-HMAC-SHA256",
        }),
      ),
    ).toEqual({
      ok: false,
      code: "UNAUTHENTICATED",
    });
    expect(parseSignatureAuthorization(reference.formatSignatureHeader({ ...params, extra: "1" }))).toEqual({
      ok: false,
      code: "INVALID_SIGNATURE",
    });
  });
});

describe("timingSafeEqualHex", () => {
  const cases: Array<[string, string, string, boolean]> = [
    ["equal strings", SIG, SIG, true],
    ["two empty strings", "", "", true],
    ["a difference in the last digit", SIG, `${SIG.slice(0, -1)}0`, false],
    ["a difference in the first digit", SIG, `f${SIG.slice(1)}`, false],
    ["a proper prefix", SIG.slice(0, 32), SIG, false],
    ["an empty and a non-empty string", "", SIG, false],
    ["strings equal after zero padding", "ab", "ab\u0000", false],
    ["the same digits in another case", SIG, SIG.toUpperCase(), false],
  ];
  it.each(cases)("compares %s correctly", (_name, a, b, expected) => {
    expect(timingSafeEqualHex(a, b)).toBe(expected);
    expect(timingSafeEqualHex(b, a)).toBe(expected);
  });
});
