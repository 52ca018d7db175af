import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { signRequest as clientSign, ERROR_CODES, isSignedPath, USER_AGENT, verifyWebhook } from "@replay/client";
import { describe, expect, it } from "vitest";
import { errorCodes } from "../lib/errors.js";
import { signRequest as serviceSign } from "../lib/signing.js";
import { deliveryHeaders } from "../services/webhooks/delivery/signature.js";

// clients/typescript (the @replay/client package, through its built output as a user imports it)
// against what it copies from the service: the route types generated from openapi.json, the error
// codes and the request signer. Each copy exists so the package stands alone; these hold it true.

const packageDir = fileURLToPath(new URL("../clients/typescript/", import.meta.url));

describe("the client package stays in step with the service", () => {
  it("its route types are what openapi-typescript makes of the committed openapi.json (else: npm run openapi)", () => {
    const fresh = execFileSync(process.execPath, [`${packageDir}scripts/generate-types.mjs`, "--stdout"], {
      encoding: "utf8",
    });
    expect(readFileSync(`${packageDir}src/openapi.ts`, "utf8")).toBe(fresh);
  });

  it("its User-Agent names the package's version", () => {
    const { version } = JSON.parse(readFileSync(`${packageDir}package.json`, "utf8")) as { version: string };
    expect(USER_AGENT).toBe(`replay-client-typescript/${version}`);
  });

  it("its error codes are the contract's", () => {
    expect([...ERROR_CODES].sort()).toEqual(Object.keys(errorCodes).sort());
  });

  const secret = "whsec-like-secret-ümlaut";
  const cases: Array<{ what: string; method: string; url: string; body?: string | Uint8Array }> = [
    { what: "no query, no body", method: "GET", url: "http://h:1/v1/replays" },
    { what: "repeated names, unsorted", method: "get", url: "http://h:1/v1/replays?b=2&a=9&a=1&b=10" },
    {
      what: "non-ASCII and reserved characters",
      method: "GET",
      url: "http://h:1/v1/replays?n%C3%A4me=%E2%9C%93&x=!*'()",
    },
    { what: "a plus and empty values", method: "GET", url: "http://h:1/v1/replays?q=a+b&empty=&bare" },
    {
      what: "a JSON body",
      method: "POST",
      url: "http://h:1/v1/webhooks",
      body: '{"url":"https://x/é","events":["a"]}',
    },
    { what: "body bytes", method: "POST", url: "http://h:1/v1/webhooks", body: new Uint8Array([0, 255, 10, 13]) },
  ];
  it.each(cases)("its signer gives lib/signing's Authorization header: $what", ({ method, url, body }) => {
    const input = { tenant: "7d7c2f36-0c1e-4c4e-9d4b-5a0f7c3b1e20", kid: "sk_1", secret, method, url, body };
    const fixed = { ts: 1_767_225_600_123, nonce: "nonce-0123456789abcdef" };
    expect(clientSign({ ...input, ...fixed })).toEqual(serviceSign({ ...input, ...fixed }));
  });

  it("its signer refuses a query the server could never verify, as lib/signing does", () => {
    const input = { tenant: "t", kid: "k", secret, method: "GET", url: "http://h:1/v1/replays?a=%ZZ" };
    expect(() => serviceSign(input)).toThrow(URIError);
    expect(() => clientSign(input)).toThrow(URIError);
  });

  it("it signs the routes the contract signs and sends the bearer key elsewhere", () => {
    expect(isSignedPath("/v1/replays")).toBe(true);
    expect(isSignedPath("/v1/replays/abc")).toBe(true);
    expect(isSignedPath("/v1/webhooks/deliveries/abc")).toBe(true);
    expect(isSignedPath("/v1/webhooks/deliveries/abc/replay")).toBe(false);
    expect(isSignedPath("/v1/api/replays")).toBe(false);
    expect(isSignedPath("/v1/api/servers")).toBe(false);
  });

  describe("its webhook verifier checks what the service's deliveries sign", () => {
    const body = '{"event_id":"0b7f6c1e-4a52-4d7e-9b1a-2f3c4d5e6f70","event":"asset.ready","data":{"asset":{"n":"é"}}}';
    const timestampS = 1_767_225_600;
    const sent = deliveryHeaders({ secret, event: "asset.ready", eventId: "e", body, timestampS });
    const at = { nowSeconds: timestampS + 10 };

    it("accepts a delivery, from node's headers or fetch's, and returns its event", () => {
      const accepted = verifyWebhook(Buffer.from(body), sent, secret, at);
      expect(accepted).toEqual({ ok: true, event: JSON.parse(body) });
      expect(verifyWebhook(body, new Headers(sent), secret, at).ok).toBe(true);
    });

    it("reads the headers however a platform hands them over: any case, one-element arrays, any Headers", () => {
      const upper = Object.fromEntries(Object.entries(sent).map(([k, v]) => [k.toUpperCase(), v]));
      expect(verifyWebhook(body, upper, secret, at).ok).toBe(true);
      const arrays = Object.fromEntries(Object.entries(sent).map(([k, v]) => [k, [v]]));
      expect(verifyWebhook(body, arrays, secret, at).ok).toBe(true);
      const headersLike = { get: (name: string) => new Headers(sent).get(name) };
      expect(verifyWebhook(body, headersLike, secret, at).ok).toBe(true);
      // Two signatures: either could be the forged one.
      const twice = { ...sent, "x-fv-signature": [sent["x-fv-signature"] ?? "", "sha256=00"] };
      expect(verifyWebhook(body, twice, secret, at)).toEqual({ ok: false, reason: "missing-headers" });
    });

    it("throws on an empty secret (an unset variable) and a tolerance that is not a number of seconds", () => {
      expect(() => verifyWebhook(body, sent, "", at)).toThrow(TypeError);
      expect(() => verifyWebhook(body, sent, secret, { ...at, toleranceSeconds: Number.NaN })).toThrow(RangeError);
      expect(() => verifyWebhook(body, sent, secret, { ...at, toleranceSeconds: -1 })).toThrow(RangeError);
    });

    it("refuses a correctly signed body that is not an event object", () => {
      for (const raw of ["null", "[]", "5", "not json"]) {
        const headers = deliveryHeaders({ secret, event: "asset.ready", eventId: "e", body: raw, timestampS });
        expect(verifyWebhook(raw, headers, secret, at)).toEqual({ ok: false, reason: "bad-body" });
      }
    });

    it("refuses a tampered body, another secret, a stale timestamp and missing headers", () => {
      expect(verifyWebhook(body.replace("ready", "failed"), sent, secret, at)).toEqual({
        ok: false,
        reason: "bad-signature",
      });
      expect(verifyWebhook(body, sent, `${secret}x`, at)).toEqual({ ok: false, reason: "bad-signature" });
      expect(verifyWebhook(body, sent, secret, { nowSeconds: timestampS + 301 })).toEqual({
        ok: false,
        reason: "stale-timestamp",
      });
      expect(verifyWebhook(body, sent, secret, { nowSeconds: timestampS + 400, toleranceSeconds: 600 }).ok).toBe(true);
      expect(verifyWebhook(body, { "x-fv-timestamp": String(timestampS) }, secret, at)).toEqual({
        ok: false,
        reason: "missing-headers",
      });
    });
  });
});
