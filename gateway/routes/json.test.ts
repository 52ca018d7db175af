import { describe, expect, it } from "vitest";
import { parseQuery } from "./json.js";

describe("parseQuery", () => {
  it("decodes each side, keeps + literal, and keeps what does not decode as sent", () => {
    const query = parseQuery("page_size=%ZZ&page_token=%FF%FE&a=b+c&a=%41&flag");
    expect(query.get("page_size")).toEqual(["%ZZ"]);
    expect(query.get("page_token")).toEqual(["%FF%FE"]);
    expect(query.get("a")).toEqual(["b+c", "A"]);
    expect(query.get("flag")).toEqual([""]);
  });
});
