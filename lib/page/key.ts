import { randomBytes } from "node:crypto";
import { link, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** Where the page token key comes from (config `pages`). */
export type PageKeySource = { key: string | undefined; keyFile: string | undefined; dataDir: string };

/**
 * The page token key's bytes: PAGE_TOKEN_KEY (base64 or hex), else the file PAGE_TOKEN_KEY_FILE
 * names (a mounted secret), else `<DATA_DIR>/page-token.key`, created on first use with 32 random
 * bytes. The file is created atomically and never replaced (written aside, then hard-linked into
 * place, which fails if another process got there first), so processes starting at once agree.
 * Replicas that do not share a DATA_DIR must share PAGE_TOKEN_KEY, or their tokens fail each other.
 */
export async function loadPageTokenKey(source: PageKeySource): Promise<Uint8Array> {
  if (source.key !== undefined) return decodeKey(source.key, "PAGE_TOKEN_KEY");
  if (source.keyFile !== undefined) return decodeKey((await readFile(source.keyFile, "utf8")).trim(), source.keyFile);
  const path = join(source.dataDir, "page-token.key");
  try {
    return decodeKey((await readFile(path, "utf8")).trim(), path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  await mkdir(source.dataDir, { recursive: true });
  const aside = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  await writeFile(aside, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
  try {
    await link(aside, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    await rm(aside, { force: true });
  }
  return decodeKey((await readFile(path, "utf8")).trim(), path);
}

function decodeKey(text: string, from: string): Uint8Array {
  const bytes =
    /^[0-9a-fA-F]+$/.test(text) && text.length % 2 === 0 ? Buffer.from(text, "hex") : Buffer.from(text, "base64");
  if (bytes.length < 32) throw new Error(`the page token key in ${from} must be at least 32 bytes (base64 or hex)`);
  return bytes;
}
