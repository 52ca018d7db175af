import { randomBytes } from "node:crypto";
import { link, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

export type KeySource = { key: string | undefined; keyFile: string | undefined; dataDir: string };

/**
 * The variable, else its _FILE, else `<DATA_DIR>/<fileName>`, made atomically and never replaced (hard-linked
 * into place) so processes starting at once agree. Replicas that do not share a DATA_DIR must share the variable.
 */
export async function loadKey(source: KeySource, name: string, fileName: string): Promise<Uint8Array> {
  if (source.key !== undefined) return decodeKey(source.key, name);
  if (source.keyFile !== undefined) return decodeKey((await readFile(source.keyFile, "utf8")).trim(), source.keyFile);
  const path = join(source.dataDir, fileName);
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

/** Hex when it reads as hex, else base64; at least 32 bytes. */
export function decodeKey(text: string, from: string): Uint8Array {
  const bytes =
    /^[0-9a-fA-F]+$/.test(text) && text.length % 2 === 0 ? Buffer.from(text, "hex") : Buffer.from(text, "base64");
  if (bytes.length < 32) throw new Error(`the key in ${from} must be at least 32 bytes (base64 or hex)`);
  return bytes;
}

export function loadPageTokenKey(source: KeySource): Promise<Uint8Array> {
  return loadKey(source, "PAGE_TOKEN_KEY", "page-token.key");
}
