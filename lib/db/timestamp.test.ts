import pg from "pg";
import { describe, expect, it } from "vitest";
import { createTimestamptzParser } from "./timestamp.js";

const pgParse = pg.types.getTypeParser(1184, "text");
const parse = createTimestamptzParser(pgParse);

/** The same Date (or the same non-Date answer) as pg's own parser. */
function expectAsPg(text: string) {
  const ours = parse(text);
  const theirs = pgParse(text);
  if (theirs instanceof Date) {
    expect(ours, text).toBeInstanceOf(Date);
    expect((ours as Date).getTime(), text).toBe(theirs.getTime());
  } else expect(ours, text).toEqual(theirs);
}

describe("createTimestamptzParser", () => {
  it("reads UTC timestamps as pg's parser does, every fraction length included", () => {
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const pad = (n: number, width: number) => String(n).padStart(width, "0");
    for (let i = 0; i < 5000; i++) {
      const date = `${pad(1000 + next(9000), 4)}-${pad(1 + next(12), 2)}-${pad(1 + next(28), 2)}`;
      const time = `${pad(next(24), 2)}:${pad(next(60), 2)}:${pad(next(60), 2)}`;
      const digits = next(7);
      const fraction = digits === 0 ? "" : `.${pad(next(10 ** digits), digits)}`;
      expectAsPg(`${date} ${time}${fraction}+00`);
    }
  });

  it("leaves every other text to pg's parser", () => {
    for (const text of [
      "2026-11-26 05:48:10.110123+05:30",
      "2026-11-26 05:48:10-08",
      "2026-11-26 05:48:10.1234567+00",
      "2026-11-26 05:48:10.+00",
      "0050-01-01 00:00:00+00",
      "0001-01-01 00:00:00+00 BC",
      "12026-01-01 00:00:00+00",
      "infinity",
      "-infinity",
      "2026-11-26T05:48:10+00",
      "2026-11-26 05:48:1x+00",
    ])
      expectAsPg(text);
  });
});
