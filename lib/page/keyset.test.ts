import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { codeOf as code } from "../../test/code-of.js";
import { keysetAfter, keysetPage } from "./keyset.js";

describe("keyset page tokens of the operator lists", () => {
  it("starts at the beginning for an empty token and after the row a UUID token names", () => {
    const id = randomUUID();
    expect(keysetAfter("")).toBeNull();
    expect(keysetAfter(id)).toBe(id);
    expect(keysetAfter(id.toUpperCase())).toBe(id);
  });

  it.each(["x", "0", `${randomUUID()} `, randomUUID().replaceAll("-", "")])(
    "refuses %j as INVALID_PAGE_TOKEN",
    (token) => {
      expect(code(() => keysetAfter(token))).toBe("INVALID_PAGE_TOKEN");
    },
  );

  it.each([
    // rows read (limit = pageSize + 1), page size, whether a token was given -> page, next token
    [[], 2, false, [], ""],
    [["a"], 2, false, ["a"], ""],
    [["a", "b"], 2, false, ["a", "b"], ""],
    [["a", "b", "c"], 2, false, ["a", "b"], "b"],
    [["c"], 2, true, ["c"], ""],
    [["c", "d", "e"], 2, true, ["c", "d"], "d"],
  ] as const)("cuts %j into pages of %i (after a token: %s)", (rows, pageSize, token, page, next) => {
    const out = keysetPage(rows, pageSize, token ? randomUUID() : null, (row) => row);
    expect(out).toEqual({ rows: page, nextPageToken: next });
  });

  it("refuses a token after which there is no row: it was issued for no row of this list", () => {
    expect(code(() => keysetPage([], 2, randomUUID(), (row: string) => row))).toBe("INVALID_PAGE_TOKEN");
  });
});
