import { describe, expect, it } from "vitest";
import { createKeyCache } from "./key-cache.js";

const identity = {
  key_id: "k",
  tenant_id: "t",
  member_id: null,
  scopes: ["servers:read"],
  rate_limit_rps: 50,
  rate_limit_burst: 100,
};

describe("API key cache", () => {
  it("forgets an entry after its TTL, so a revocation holds within it even without the broadcast", () => {
    const cache = createKeyCache({ ttlMs: 500 });
    cache.set("h", identity, 1000);
    expect(cache.get("h", 1499)).toBe(identity);
    expect(cache.get("h", 1500)).toBeUndefined();
  });

  it("drops an evicted key at once", () => {
    const cache = createKeyCache();
    cache.set("h", identity, 0);
    cache.evict("h");
    expect(cache.get("h", 1)).toBeUndefined();
  });

  it("stays bounded under key churn", () => {
    const cache = createKeyCache({ maxEntries: 2 });
    cache.set("a", identity, 0);
    cache.set("b", identity, 0);
    cache.set("c", identity, 0);
    expect(cache.get("a", 1)).toBeUndefined();
    expect(cache.get("c", 1)).toBe(identity);
  });
});
