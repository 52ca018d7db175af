// `npm run build`'s last step (so `npm ci` and `npm start` run it): builds the embedded database's
// initdb template for the installed PGlite version, once; a no-op while it exists. A failure costs
// only speed (a new DATA_DIR then runs initdb), so it is reported and the build goes on.
//   node dist/lib/db/prepare-template.js [cache directory, default node_modules/.cache/replay-service]
import { relative } from "node:path";
import { defaultTemplateDir, ensureTemplate } from "./embedded-template.js";

const began = performance.now();
const cacheDir = process.argv[2] ?? defaultTemplateDir();
try {
  const { dir, created } = await ensureTemplate(cacheDir);
  if (created) {
    const seconds = ((performance.now() - began) / 1000).toFixed(1);
    process.stderr.write(`embedded database template: built ${relative(process.cwd(), dir) || dir} in ${seconds} s\n`);
  }
} catch (err) {
  process.stderr.write(
    `embedded database template: not built (a new DATA_DIR will run initdb instead): ${(err as Error).message}\n`,
  );
}
