import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { codeOf as code } from "../../test/code-of.js";
import { loadPageTokenKey } from "../keys/key-file.js";
import { PAGE_SIZE_DEFAULT, pageSizeOf, parsePageSize } from "./size.js";
import { createPageTokens, type PageBinding } from "./token.js";

describe("page_size (decisions.md §5)", () => {
  it.each([
    [undefined, 20],
    [["1"], 1],
    [["20"], 20],
    [["100"], 100],
    [["007"], 7],
  ] as const)("takes %j as %i", (values, size) => {
    expect(parsePageSize(values as readonly string[] | undefined)).toBe(size);
  });

  it.each([
    [["0"]],
    [["101"]],
    [["1000"]],
    [["-1"]],
    [["+5"]],
    [[" 5"]],
    [["5 "]],
    [["1e2"]],
    [["5.0"]],
    [[""]],
    [["5", "5"]],
    [[]],
  ])("refuses %j with INVALID_PAGE_SIZE", (values) => {
    expect(code(() => parsePageSize(values))).toBe("INVALID_PAGE_SIZE");
  });

  it("applies the same range to the number a request carries", () => {
    expect(pageSizeOf(undefined)).toBe(PAGE_SIZE_DEFAULT);
    expect(pageSizeOf(100)).toBe(100);
    for (const bad of [0, 101, -3, 2.5]) expect(code(() => pageSizeOf(bad))).toBe("INVALID_PAGE_SIZE");
  });
});

describe("page tokens", () => {
  const tokens = createPageTokens(randomBytes(32));
  const binding: PageBinding = {
    tenantId: randomUUID(),
    route: "api",
    filters: { server_id: randomUUID(), integration: undefined },
  };
  const position = { startedAt: "2026-11-25T01:02:03.004Z", id: randomUUID() };

  it("gives back the position it was issued with, for the same binding", () => {
    expect(tokens.read(binding, tokens.issue(binding, position))).toEqual(position);
  });

  it.each([
    ["another tenant", { ...binding, tenantId: randomUUID() }],
    ["the other route", { ...binding, route: "signed" }],
    ["another server filter", { ...binding, filters: { ...binding.filters, server_id: randomUUID() } }],
    ["an added filter", { ...binding, filters: { ...binding.filters, integration: "" } }],
    ["a dropped filter", { ...binding, filters: { server_id: undefined, integration: undefined } }],
  ])("refuses a token used with %s as INVALID_PAGE_TOKEN", (_name, other) => {
    const token = tokens.issue(binding, position);
    expect(code(() => tokens.read(other, token))).toBe("INVALID_PAGE_TOKEN");
  });

  it("refuses tampered, truncated, padded, foreign and garbage tokens", () => {
    const token = tokens.issue(binding, position);
    const bytes = Buffer.from(token, "base64url");
    const flipped = Array.from({ length: bytes.length }, (_, i) => {
      const copy = Buffer.from(bytes);
      copy[i] = (copy[i] as number) ^ 1;
      return copy.toString("base64url");
    });
    const bad = [
      ...flipped,
      token.slice(0, -1),
      token.slice(1),
      `${token}A`,
      `${token}=`,
      createPageTokens(randomBytes(32)).issue(binding, position),
      "",
      "not a token",
      "A".repeat(600),
      Buffer.from([1, ...Buffer.from("{}"), ...Buffer.alloc(16)]).toString("base64url"),
    ];
    for (const candidate of bad)
      expect(
        code(() => tokens.read(binding, candidate)),
        candidate,
      ).toBe("INVALID_PAGE_TOKEN");
  });

  it("refuses a key shorter than 32 bytes", () => {
    expect(() => createPageTokens(randomBytes(16))).toThrow(/32 bytes/);
  });
});

describe("page token key", () => {
  async function dataDir() {
    const dir = await mkdtemp(join(tmpdir(), "page-key-"));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    return dir;
  }

  it("generates one key into DATA_DIR that processes starting at once all read back", async () => {
    const dir = await dataDir();
    const keys = await Promise.all(
      Array.from({ length: 8 }, () => loadPageTokenKey({ key: undefined, keyFile: undefined, dataDir: dir })),
    );
    expect(new Set(keys.map((key) => Buffer.from(key).toString("hex"))).size).toBe(1);
    expect(keys[0]?.length).toBe(32);
    expect((await stat(join(dir, "page-token.key"))).mode & 0o777).toBe(0o600);
    const again = await loadPageTokenKey({ key: undefined, keyFile: undefined, dataDir: dir });
    expect(Buffer.from(again).equals(Buffer.from(keys[0] as Uint8Array))).toBe(true);
  });

  it("takes PAGE_TOKEN_KEY (hex or base64) or PAGE_TOKEN_KEY_FILE before DATA_DIR, and refuses a short key", async () => {
    const dir = await dataDir();
    const raw = randomBytes(32);
    expect(Buffer.from(await loadPageTokenKey({ key: raw.toString("hex"), keyFile: undefined, dataDir: dir }))).toEqual(
      raw,
    );
    expect(
      Buffer.from(await loadPageTokenKey({ key: raw.toString("base64"), keyFile: undefined, dataDir: dir })),
    ).toEqual(raw);
    const file = join(dir, "mounted");
    await import("node:fs/promises").then((fs) => fs.writeFile(file, `${raw.toString("base64")}\n`));
    expect(Buffer.from(await loadPageTokenKey({ key: undefined, keyFile: file, dataDir: dir }))).toEqual(raw);
    await expect(readFile(join(dir, "page-token.key"))).rejects.toThrow();
    await expect(loadPageTokenKey({ key: "c2hvcnQ=", keyFile: undefined, dataDir: dir })).rejects.toThrow(/32 bytes/);
  });
});
