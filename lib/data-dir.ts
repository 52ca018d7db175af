import { constants } from "node:fs";
import { access, mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type Config, ConfigError, type ProcessName } from "./config.js";

/**
 * What a service process would keep under DATA_DIR for want of a variable, checked before it starts: on a
 * read-only root filesystem the first write would end the start in a stack trace, not name the variable.
 */
export async function checkWritableDirs(config: Config, name: ProcessName | undefined): Promise<void> {
  const problems: string[] = [];
  const keyed = config.pages.tokenKey !== undefined || config.pages.tokenKeyFile !== undefined;
  if ((name === "replays" || name === "webhooks") && !keyed) {
    const failure = await unwritable(config.db.dataDir);
    if (failure) {
      problems.push(
        `PAGE_TOKEN_KEY (or PAGE_TOKEN_KEY_FILE) must be set: without it ${name} keeps a generated key in DATA_DIR, and "${config.db.dataDir}" ${failure}`,
      );
    }
  }
  if (name === "replays") {
    const url = config.blob.url;
    if (url === undefined) {
      const failure = await unwritable(join(config.db.dataDir, "blobs"));
      if (failure) {
        problems.push(
          `BLOB_URL must be set: without it replays keeps replay archives in DATA_DIR/blobs, and "${join(config.db.dataDir, "blobs")}" ${failure}`,
        );
      }
    } else if (url.startsWith("file:")) {
      const failure = await unwritable(fileURLToPath(url));
      if (failure) problems.push(`BLOB_URL "${url}" ${failure}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
}

/** Made if missing; undefined when it can be written. */
async function unwritable(dir: string): Promise<string | undefined> {
  try {
    await mkdir(resolve(dir), { recursive: true });
    await access(dir, constants.W_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return `cannot be created or written (${code}${code === "EROFS" ? ": read-only file system" : ""})`;
  }
}
