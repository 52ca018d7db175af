import { describe, expect, it } from "vitest";
import { parseAllowTargets, type Resolver } from "./target.js";
import { vetWebhookUrl } from "./webhook-url.js";

/** A resolver with fixed answers; a name it does not know does not resolve (ENOTFOUND). */
function fixedResolver(answers: Record<string, string[]>): Resolver {
  return async (hostname) => {
    const found = answers[hostname];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return found;
  };
}

const deps = {
  resolve: fixedResolver({
    "hooks.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    "internal.example.com": ["10.0.0.5"],
    "mixed.example.com": ["93.184.216.34", "127.0.0.1"],
    "v6-loopback.example.com": ["::1"],
    "mapped.example.com": ["::ffff:169.254.169.254"],
  }),
  allowTargets: parseAllowTargets([]),
};

async function detailOf(url: string, options = deps): Promise<string | undefined> {
  const found = await vetWebhookUrl(url, options);
  if (found) expect(found).toMatchObject({ field: "url", code: "VALIDATION_ERROR" });
  return found?.detail;
}

describe("vetWebhookUrl", () => {
  it("accepts an https URL whose host resolves to public addresses only", async () => {
    expect(await detailOf("https://hooks.example.com/receive?x=1")).toBeUndefined();
    expect(await detailOf("https://93.184.216.34:8443/hook")).toBeUndefined();
    expect(await detailOf("https://[2606:4700:4700::1111]/hook")).toBeUndefined();
  });

  it("accepts a host name that does not resolve yet, since every attempt vets it again", async () => {
    expect(await detailOf("https://not-yet.example.com/hook")).toBeUndefined();
  });

  it.each([
    ["http://hooks.example.com/", /https/],
    ["ftp://hooks.example.com/", /https/],
    ["wss://hooks.example.com/", /https/],
    ["hooks.example.com/hook", /absolute https URL/],
    ["", /absolute https URL/],
    ["https://user@hooks.example.com/", /user-info/],
    ["https://user:pass@hooks.example.com/", /user-info/],
    ["https://:pass@hooks.example.com/", /user-info/],
    ["https://@hooks.example.com/", /user-info/],
    ["https://:@hooks.example.com/", /user-info/],
    ["HTTPS:\\\\@hooks.example.com/", /user-info/],
    [" https://@hooks.example.com/", /user-info/],
  ])("refuses %s", async (url, detail) => {
    expect(await detailOf(url)).toMatch(detail);
  });

  it("refuses a URL longer than 2048 characters and accepts one of exactly 2048", async () => {
    const base = "https://hooks.example.com/";
    expect(await detailOf(base + "a".repeat(2048 - base.length))).toBeUndefined();
    expect(await detailOf(base + "a".repeat(2049 - base.length))).toMatch(/at most 2048/);
    // Code points, not UTF-16 units (decisions.md §1): 2048 of them accepted even as 4000 units.
    const astral = "\u{1F600}".repeat(1_000);
    expect(await detailOf(base + astral + "a".repeat(1048 - base.length))).toBeUndefined();
    expect(await detailOf(base + astral + "a".repeat(1049 - base.length))).toMatch(/at most 2048/);
  });

  it("keeps an @ of the path or query, which is no user-info", async () => {
    expect(await detailOf("https://hooks.example.com/a@b?c=@d#@e")).toBeUndefined();
  });

  it.each([
    ["https://127.0.0.1/", "loopback"],
    ["https://2130706433/", "loopback"],
    ["https://0x7f.1/", "loopback"],
    ["https://0x7f000001/", "loopback"],
    ["https://017700000001/", "loopback"],
    ["https://127.1/", "loopback"],
    ["https://0/", "unspecified"],
    ["https://[::1]/", "loopback"],
    ["https://[::]/", "unspecified"],
    ["https://[::ffff:127.0.0.1]/", "loopback"],
    ["https://[::ffff:a9fe:a9fe]/", "link-local"],
    ["https://[64:ff9b::10.0.0.1]/", "private"],
    ["https://[2002:c0a8:101::1]/", "private"],
    ["https://[fd00::1]/", "unique-local"],
    ["https://[fe80::1]/", "link-local"],
    ["https://169.254.169.254/latest/meta-data", "link-local"],
    ["https://10.1.2.3/", "private"],
    ["https://192.168.0.1:8443/", "private"],
    ["https://100.64.0.1/", "cgnat"],
    ["https://224.0.0.1/", "multicast"],
    ["https://192.0.2.10/", "documentation"],
    ["https://[2001:db8::1]/", "documentation"],
    ["https://198.18.0.1/", "benchmark"],
    ["https://240.0.0.1/", "reserved"],
    ["https://255.255.255.255/", "broadcast"],
    ["https://internal.example.com/", "private"],
    ["https://mixed.example.com/", "loopback"],
    ["https://v6-loopback.example.com/", "loopback"],
    ["https://mapped.example.com/", "link-local"],
  ])("refuses %s (%s), literal or resolved", async (url, reason) => {
    expect(await detailOf(url)).toContain(`(${reason})`);
  });

  it("lets WEBHOOK_ALLOW_TARGETS reach a local receiver by host and port after WHATWG parsing", async () => {
    const allowing = { ...deps, allowTargets: parseAllowTargets(["127.0.0.1:8443", "internal.example.com:443"]) };
    expect(await detailOf("https://127.0.0.1:8443/hook", allowing)).toBeUndefined();
    expect(await detailOf("https://0x7f.1:8443/hook", allowing)).toBeUndefined();
    expect(await detailOf("https://2130706433:8443/hook", allowing)).toBeUndefined();
    expect(await detailOf("https://INTERNAL.example.com/hook", allowing)).toBeUndefined();
    expect(await detailOf("https://internal.example.com:443/hook", allowing)).toBeUndefined();
    // Another port, or http, is not allowed by the same entry.
    expect(await detailOf("https://127.0.0.1:9443/hook", allowing)).toContain("(loopback)");
    expect(await detailOf("https://internal.example.com:8443/hook", allowing)).toContain("(private)");
    expect(await detailOf("http://127.0.0.1:8443/hook", allowing)).toMatch(/https/);
  });
});
