import { describe, expect, it } from "vitest";
import { canonicalJson, nestsDeeperThan, parseQuery } from "./json.js";

describe("parseQuery", () => {
  it("decodes each side, keeps + literal, and keeps what does not decode as sent", () => {
    const query = parseQuery("page_size=%ZZ&page_token=%FF%FE&a=b+c&a=%41&flag");
    expect(query.get("page_size")).toEqual(["%ZZ"]);
    expect(query.get("page_token")).toEqual(["%FF%FE"]);
    expect(query.get("a")).toEqual(["b+c", "A"]);
    expect(query.get("flag")).toEqual([""]);
  });
});

describe("canonicalJson", () => {
  it("sorts keys at every level and drops white space", () => {
    expect(canonicalJson(JSON.parse('{"b":[1,{"z":null,"a":"x"}],"a":1e3,"c":{}}'))).toBe(
      '{"a":1000,"b":[1,{"a":"x","z":null}],"c":{}}',
    );
    expect(canonicalJson([])).toBe("[]");
    expect(canonicalJson("\u2028")).toBe(JSON.stringify("\u2028"));
  });

  it("takes any depth without overflowing the stack (4 000 levels was a RangeError)", () => {
    const depth = 100_000;
    const text = `${"[".repeat(depth)}${"]".repeat(depth)}`;
    expect(canonicalJson(JSON.parse(text))).toBe(text);
  });
});

describe("nestsDeeperThan", () => {
  it("counts brackets outside strings only", () => {
    expect(nestsDeeperThan('{"a":[[1]]}', 3)).toBe(false);
    expect(nestsDeeperThan('{"a":[[[1]]]}', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":"[[[[\\"[[[["}', 1)).toBe(false);
  });
});
