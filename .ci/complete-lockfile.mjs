// npm install leaves out of package-lock.json the optional platform packages its registry does not
// serve (here: Windows, macOS, Android and musl builds of biome and buf), and `npm ci` then refuses
// the lock as out of sync. This adds an entry for each missing optional dependency; npm ci skips
// them on this platform like any optional package it cannot install. Run it after changing
// dependencies: `node .ci/complete-lockfile.mjs`. It is idempotent.
import { readFileSync, writeFileSync } from "node:fs";

const path = new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
const added = [];
for (const entry of Object.values(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    if (lock.packages[key]) continue;
    lock.packages[key] = { version, dev: entry.dev ?? false, optional: true };
    added.push(`${name}@${version}`);
  }
}
if (added.length > 0) writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(
  added.length > 0 ? `added ${added.join(", ")}` : "package-lock.json already lists every optional dependency",
);
