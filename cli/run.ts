// replayctl as one process: bundled by npm run build into dist/bin/replayctl.js, which the bin (replayctl.ts) loads.
import { main } from "./main.js";

// No process.exit: it could cut off output still being written to a pipe.
process.exitCode = await main(process.argv.slice(2), process.env);
