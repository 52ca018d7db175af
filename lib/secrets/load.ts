import { readFile } from "node:fs/promises";
import type { Config } from "../config.js";
import { decodeKey, loadKey } from "../keys/key-file.js";
import { createSecretBox, type SecretBox, SecretKeyError } from "./box.js";

/**
 * The process's secret box: SECRETS_KEY (or the file SECRETS_KEY_FILE names, or, in the embedded
 * mode, DATA_DIR/secrets.key made on first start) seals; SECRETS_KEY_PREVIOUS also opens.
 */
export async function loadSecretBox(config: Pick<Config, "secrets" | "db">): Promise<SecretBox> {
  const s = config.secrets;
  const key = await loadKey(
    { key: s.key, keyFile: s.keyFile, dataDir: config.db.dataDir },
    "SECRETS_KEY",
    "secrets.key",
  );
  const previousText =
    s.previousKey ?? (s.previousKeyFile === undefined ? undefined : await readFile(s.previousKeyFile, "utf8"));
  // An empty file is no previous key (a Secret's `previous` emptied once a rotation is over).
  const previous =
    previousText === undefined || previousText.trim() === ""
      ? undefined
      : decodeKey(previousText.trim(), "SECRETS_KEY_PREVIOUS");
  for (const [name, bytes] of [
    ["SECRETS_KEY", key],
    ["SECRETS_KEY_PREVIOUS", previous],
  ] as const) {
    if (bytes !== undefined && bytes.length !== 32)
      throw new SecretKeyError(`${name} must be 32 bytes (base64 or hex)`);
  }
  return createSecretBox(key, previous);
}
