import { getTextEncoding } from "@bufbuild/protobuf/wire";
import { describe, expect, it } from "vitest";
import { keepByteOrderMarks } from "./text-encoding.js";

describe("keepByteOrderMarks", () => {
  keepByteOrderMarks();
  const { encodeUtf8, decodeUtf8 } = getTextEncoding();

  it.each([
    ["empty", ""],
    ["an id", "0b87778c-7fcf-4e75-8c2e-fe239852e1ce"],
    ["control characters and DEL", "a\u0000b\u0001\u007f"],
    ["non-ASCII", "Café ✓ 😀"],
    ["a leading byte order mark", "\ufeffx"],
    ["a lone surrogate", "a\ud800b"],
    ["long ASCII", "x".repeat(10_000)],
  ])("encodes %s to the bytes TextEncoder gives", (_name, text) => {
    expect(Buffer.from(encodeUtf8(text))).toEqual(Buffer.from(new TextEncoder().encode(text)));
  });

  it("decodes a leading U+FEFF as part of the string", () => {
    expect(decodeUtf8(new TextEncoder().encode("\ufeffx"))).toBe("\ufeffx");
  });
});
