import { createHmac, timingSafeEqual } from "node:crypto";
import { DomainError } from "../errors.js";

/** What a page token is bound to: used with anything else it is INVALID_PAGE_TOKEN (decisions.md §5). */
export type PageBinding = {
  tenantId: string;
  route: string;
  /** Unset ones included, so adding or dropping a filter changes the binding. */
  filters: Readonly<Record<string, string | undefined>>;
};

/** Positions are JSON values: the keyset of the last row. */
export type PageTokens = {
  issue(binding: PageBinding, position: unknown): string;
  /** INVALID_PAGE_TOKEN for anything this key did not issue for this binding. */
  read<P>(binding: PageBinding, token: string): P;
};

/** UTC to the microsecond, which a JS Date would cut to milliseconds. */
export function isPositionTimestamp(value: unknown): value is string {
  return typeof value === "string" && /^\d{4,}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(value);
}

const VERSION = 1;
const MAC_BYTES = 16;
const MAX_TOKEN_CHARS = 512;

const invalid = () => new DomainError("INVALID_PAGE_TOKEN", "page_token was not issued for this list");

/**
 * The binding is only in the MAC, so a token used by another tenant, route or filters fails like a forged
 * one. A key rotation invalidates the tokens in flight (clients start over).
 */
export function createPageTokens(key: Uint8Array): PageTokens {
  if (key.length < 32) throw new Error("a page token key needs at least 32 bytes");
  const mac = (binding: PageBinding, payload: Buffer) => {
    const filters = Object.keys(binding.filters)
      .sort()
      .map((name) => [name, binding.filters[name] ?? null]);
    const bound = JSON.stringify([VERSION, binding.tenantId.toLowerCase(), binding.route, filters]);
    return createHmac("sha256", key).update(bound).update("\n").update(payload).digest().subarray(0, MAC_BYTES);
  };
  return {
    issue(binding, position) {
      const payload = Buffer.from(JSON.stringify(position), "utf8");
      return Buffer.concat([Buffer.from([VERSION]), payload, mac(binding, payload)]).toString("base64url");
    },
    read<P>(binding: PageBinding, token: string): P {
      if (token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) throw invalid();
      const bytes = Buffer.from(token, "base64url");
      // base64url decoding is lenient: re-encoding must give back exactly what was sent.
      if (bytes.length <= 1 + MAC_BYTES || bytes.toString("base64url") !== token || bytes[0] !== VERSION) {
        throw invalid();
      }
      const payload = bytes.subarray(1, bytes.length - MAC_BYTES);
      if (!timingSafeEqual(bytes.subarray(bytes.length - MAC_BYTES), mac(binding, payload))) throw invalid();
      try {
        return JSON.parse(payload.toString("utf8")) as P;
      } catch {
        throw invalid();
      }
    },
  };
}
