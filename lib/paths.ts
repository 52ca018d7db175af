import { fileURLToPath } from "node:url";

/**
 * A folder that ships beside a module's source (migrations). Compiled code runs from dist/, and
 * .sql files are not compiled, so `dist/services/x/main.js` reads `services/x/<name>`.
 */
export function sourceFolder(moduleUrl: string, name: string): string {
  const path = fileURLToPath(new URL(name, moduleUrl));
  const at = path.lastIndexOf("/dist/");
  return at === -1 ? path : path.slice(0, at) + path.slice(at + "/dist".length);
}
