import { describe, expect, it } from "vitest";
import { isScope, parseScopes, SCOPES } from "./scopes.js";

describe("SCOPES", () => {
  it("lists exactly the five contract scopes", () => {
    expect([...SCOPES]).toEqual([
      "replays:read",
      "replays:write",
      "servers:read",
      "servers:write",
      "collections:write",
    ]);
  });
});

describe("isScope", () => {
  it.each([
    ["replays:read", true],
    ["collections:write", true],
    ["Replays:Read", false],
    [" replays:read", false],
    ["replays:*", false],
    ["", false],
  ])("judges %j", (text, expected) => {
    expect(isScope(text)).toBe(expected);
  });
});

describe("parseScopes", () => {
  it.each([
    ["one scope", "replays:read", ["replays:read"]],
    ["items trimmed", " replays:read ,\tservers:write ", ["replays:read", "servers:write"]],
    ["repeats dropped, first kept", "servers:read,replays:read,servers:read", ["servers:read", "replays:read"]],
    [
      "all five in the order given",
      "collections:write,servers:write,servers:read,replays:write,replays:read",
      ["collections:write", "servers:write", "servers:read", "replays:write", "replays:read"],
    ],
  ])("parses %s", (_name, text, expected) => {
    expect(parseScopes(text)).toEqual(expected);
  });

  it.each([
    ["an unknown scope", "replays:read,replays:admin", /unknown scope "replays:admin"/],
    ["a scope in the wrong case", "Replays:Read", /unknown scope "Replays:Read"/],
    ["another separator", "replays:read;servers:read", /unknown scope "replays:read;servers:read"/],
    ["an empty list", "", /empty scope/],
    ["a blank list", "   ", /empty scope/],
    ["a trailing comma", "replays:read,", /empty scope/],
    ["an empty item in the middle", "replays:read,,servers:read", /empty scope/],
  ])("throws naming the bad item for %s", (_name, text, message) => {
    expect(() => parseScopes(text)).toThrow(message);
  });

  it("lists the valid scopes in the error so the caller can fix the typo", () => {
    expect(() => parseScopes("replay:read")).toThrow(
      /valid scopes: replays:read, replays:write, servers:read, servers:write, collections:write/,
    );
  });
});
