import { createHmac, randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  canonicalQuery,
  canonicalString,
  hmacSha256Hex,
  rfc3986Encode,
  SIGNING_SCHEME,
  sha256Hex,
  signRequest,
} from "./signing.js";

// The conformance suite's own implementation, written independently of ours.
const REFERENCE = new URL("../../shared/conformance/lib/signing.mjs", import.meta.url);
const hasReference = existsSync(fileURLToPath(REFERENCE));

type Reference = {
  canonicalQuery(search: string): string;
  signRequest(input: {
    tenant: string;
    kid: string;
    secret: string;
    method: string;
    url: string;
    body?: Uint8Array | string;
    ts?: number;
    nonce?: string;
  }): {
    authorization: string;
    canonical: string;
    sig: string;
    ts: number;
    nonce: string;
  };
};

async function loadReference(): Promise<Reference> {
  return (await import(REFERENCE.href)) as Reference;
}

const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

const queryCases: Array<[string, string, string]> = [
  ["no query", "", ""],
  ["a bare question mark", "?", ""],
  ["a leading question mark", "?page_size=5", "page_size=5"],
  ["a literal plus (never a space)", "a=1+2", "a=1%2B2"],
  ["a lower-case escape, re-encoded upper case", "a=%2b", "a=%2B"],
  ["a plus and %2B, which are the same character", "a=%2B&a=+", "a=%2B&a=%2B"],
  ["a name without '=' (empty value)", "a&a=", "a=&a="],
  ["pairs out of order", "b=2&a=1", "a=1&b=2"],
  ["a repeated name, sorted by value", "x=3&x=1&x=2", "x=1&x=2&x=3"],
  ["values sorted by code unit (upper before lower)", "x=b&x=B", "x=B&x=b"],
  ["names sorted before values, not whole pairs", "a-b=1&a=2", "a=2&a-b=1"],
  ["names sorted in their encoded form", "a%5B%5D=1&a=2", "a=2&a%5B%5D=1"],
  ["empty parts skipped", "&a=1&&b=2&", "a=1&b=2"],
  ["an '=' inside the value", "k=a=b", "k=a%3Db"],
  ["an empty name", "=v", "=v"],
  ["a space as %20", "sp=a%20b", "sp=a%20b"],
  ["RFC 3986 reserved characters encoded", "r=*'()!", "r=%2A%27%28%29%21"],
  ["unreserved characters decoded", "u=%41%2D%2E%5F%7E", "u=A-._~"],
  ["other reserved characters encoded", "g=:/?@[]$,;", "g=%3A%2F%3F%40%5B%5D%24%2C%3B"],
  ["a percent-encoded UTF-8 character kept", "q=caf%C3%A9", "q=caf%C3%A9"],
  ["a raw non-ASCII character encoded as UTF-8", "q=café", "q=caf%C3%A9"],
  ["lower-case UTF-8 escapes upper-cased", "q=%e2%82%ac", "q=%E2%82%AC"],
  ["a character outside the BMP", "e=😀", "e=%F0%9F%98%80"],
  ["an encoded name", "na%6De=1", "name=1"],
];

const malformedQueries: Array<[string, string]> = [
  ["a lone percent", "a=%"],
  ["a truncated escape", "a=%2"],
  ["a non-hex escape", "a=%zz"],
  ["a byte that is not UTF-8", "%FF=1"],
  ["a truncated UTF-8 sequence", "a=%E0%A4"],
  ["an encoded lone surrogate", "a=%ED%A0%80"],
  ["a raw lone surrogate", "a=\uD800"],
];

describe("rfc3986Encode", () => {
  it.each([
    ["unreserved characters as they are", "AZaz09-._~", "AZaz09-._~"],
    ["sub-delims that encodeURIComponent leaves alone", "!'()*", "%21%27%28%29%2A"],
    ["space and plus", " +", "%20%2B"],
    ["UTF-8 bytes in upper-case hex", "é€", "%C3%A9%E2%82%AC"],
  ])("encodes %s", (_name, input, expected) => {
    expect(rfc3986Encode(input)).toBe(expected);
  });
});

describe("canonicalQuery", () => {
  it.each(queryCases)("canonicalises %s", (_name, input, expected) => {
    expect(canonicalQuery(input)).toBe(expected);
  });

  it.each(malformedQueries)("returns undefined instead of throwing for %s", (_name, input) => {
    expect(canonicalQuery(input)).toBeUndefined();
    expect(canonicalQuery(`ok=1&${input}`)).toBeUndefined();
  });

  it("gives the same line whatever order or escaping the client chose", () => {
    expect(canonicalQuery("b=%7e&a=x+y")).toBe(canonicalQuery("a=x%2By&b=~"));
  });

  it.skipIf(!hasReference)("agrees byte for byte with the conformance reference on every table case", async () => {
    const reference = await loadReference();
    for (const [, input, expected] of queryCases) {
      expect(reference.canonicalQuery(input)).toBe(expected);
    }
    for (const [, input] of malformedQueries) {
      expect(() => reference.canonicalQuery(input)).toThrow(URIError);
    }
  });

  it.skipIf(!hasReference)("agrees with the conformance reference on random queries", async () => {
    const reference = await loadReference();
    const alphabet = [
      "a",
      "b",
      "A",
      "=",
      "&",
      "+",
      "%",
      "2",
      "B",
      "b",
      "E",
      "9",
      "~",
      "*",
      " ",
      "é",
      "%2B",
      "%2b",
      "%C3%A9",
      "%e2%82%ac",
      "%20",
      "😀",
    ];
    for (let i = 0; i < 2000; i++) {
      const length = Math.floor(Math.random() * 12);
      let query = "";
      for (let j = 0; j < length; j++) query += alphabet[Math.floor(Math.random() * alphabet.length)];
      let expected: string | undefined;
      try {
        expected = reference.canonicalQuery(query);
      } catch {
        expected = undefined;
      }
      expect(canonicalQuery(query), query).toBe(expected);
    }
  });
});

describe("canonicalString", () => {
  it("joins the nine lines with \\n, no trailing newline, method upper-cased", () => {
    const tenant = randomUUID();
    const kid = randomUUID();
    const text = canonicalString({
      tenant,
      ts: 1700000000000,
      nonce: "abcdefghijklmnop",
      kid,
      method: "post",
      path: "/v1/webhooks",
      query: "a=1&b=2",
      bodySha256: EMPTY_SHA256,
    });
    expect(text).toBe(
      `FV1-HMAC-SHA256\n${tenant}\n1700000000000\nabcdefghijklmnop\n${kid}\nPOST\n/v1/webhooks\na=1&b=2\n${EMPTY_SHA256}`,
    );
    expect(text.split("\n")).toHaveLength(9);
  });

  it("keeps an empty query as an empty line", () => {
    const text = canonicalString({
      tenant: randomUUID(),
      ts: 1,
      nonce: "n".repeat(16),
      kid: "k",
      method: "GET",
      path: "/v1/replays",
      query: "",
      bodySha256: EMPTY_SHA256,
    });
    expect(text.split("\n")[7]).toBe("");
  });
});

describe("sha256Hex and hmacSha256Hex", () => {
  it("hashes the empty body to the well-known empty SHA-256", () => {
    expect(sha256Hex("")).toBe(EMPTY_SHA256);
    expect(sha256Hex(new Uint8Array())).toBe(EMPTY_SHA256);
  });

  it("hashes a string as its UTF-8 bytes", () => {
    expect(sha256Hex("é")).toBe(sha256Hex(new Uint8Array([0xc3, 0xa9])));
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("matches RFC 4231 test case 2", () => {
    expect(hmacSha256Hex("Jefe", "what do ya want for nothing?")).toBe(
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
    );
  });

  it("keys with the secret's UTF-8 bytes", () => {
    const expected = createHmac("sha256", Buffer.from([0x6b, 0xc3, 0xa9]))
      .update("text")
      .digest("hex");
    expect(hmacSha256Hex("ké", "text")).toBe(expected);
  });
});

describe("signRequest", () => {
  const secret = "secret-value";

  it("builds the header from the canonical string of the URL's path, query and body", () => {
    const tenant = randomUUID();
    const kid = randomUUID();
    const body = JSON.stringify({
      url: "https://example.com/x",
      events: ["asset.ready"],
    });
    const signed = signRequest({
      tenant,
      kid,
      secret,
      method: "post",
      url: "https://gw.example/v1/webhooks?b=2&a=%2b",
      body,
      ts: 1700000000123,
      nonce: "nonce_nonce-nonce",
    });
    const canonical = [
      SIGNING_SCHEME,
      tenant,
      "1700000000123",
      "nonce_nonce-nonce",
      kid,
      "POST",
      "/v1/webhooks",
      "a=%2B&b=2",
      sha256Hex(body),
    ].join("\n");
    const sig = hmacSha256Hex(secret, canonical);
    expect(signed).toEqual({
      authorization: `FV1-HMAC-SHA256 tenant=${tenant},ts=1700000000123,nonce=nonce_nonce-nonce,kid=${kid},sig=${sig}`,
      ts: 1700000000123,
      nonce: "nonce_nonce-nonce",
      sig,
    });
  });

  it("signs bytes and the same text identically", () => {
    const input = {
      tenant: randomUUID(),
      kid: "k1",
      secret,
      method: "PUT",
      url: "https://h/p",
      ts: 5,
      nonce: "x".repeat(16),
    };
    expect(signRequest({ ...input, body: "é" }).sig).toBe(signRequest({ ...input, body: Buffer.from("é") }).sig);
    expect(signRequest(input).sig).toBe(signRequest({ ...input, body: "" }).sig);
  });

  it("defaults ts to now and nonce to 24 fresh base64url characters", () => {
    const before = Date.now();
    const first = signRequest({
      tenant: randomUUID(),
      kid: "k",
      secret,
      method: "GET",
      url: "https://h/v1/replays",
    });
    const second = signRequest({
      tenant: randomUUID(),
      kid: "k",
      secret,
      method: "GET",
      url: "https://h/v1/replays",
    });
    expect(first.ts).toBeGreaterThanOrEqual(before);
    expect(first.ts).toBeLessThanOrEqual(Date.now());
    expect(first.nonce).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(second.nonce).not.toBe(first.nonce);
  });

  it("refuses to sign a query that the gateway could not decode", () => {
    expect(() =>
      signRequest({
        tenant: randomUUID(),
        kid: "k",
        secret,
        method: "GET",
        url: "https://h/p?a=%FF",
      }),
    ).toThrow(URIError);
  });

  it.skipIf(!hasReference)("produces the conformance reference's header and sig byte for byte", async () => {
    const reference = await loadReference();
    const urls = [
      "https://gw.example/v1/replays",
      "https://gw.example/v1/replays?page_size=5&server_id=x",
      "http://127.0.0.1:8080/v1/webhooks/abc/deliveries?page_token=a+b%2b&page_size=1",
      "https://gw.example/v1/replays?q=caf%C3%A9&r=*'()!&a&a=",
    ];
    for (const url of urls) {
      for (const [method, body] of [
        ["get", undefined],
        ["POST", '{"a":"é"}'],
        ["DELETE", new Uint8Array([1, 2, 255])],
      ] as const) {
        const input = {
          tenant: randomUUID(),
          kid: randomUUID(),
          secret: "sé cret",
          method,
          url,
          body,
          ts: Date.now(),
          nonce: "AbC_-123456789xyz",
        };
        const ours = signRequest(input);
        const theirs = reference.signRequest(input);
        expect(ours.authorization).toBe(theirs.authorization);
        expect(ours.sig).toBe(theirs.sig);
      }
    }
  });
});
