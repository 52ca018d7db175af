#!/usr/bin/env node
// The bin: npm run build bundles cli/run.ts and what it imports into one file, which starts in half the time
// of the ~400 modules it is made of. Loaded by its path, so that the bin's own path never changes.
await import(new URL("../bin/replayctl.js", import.meta.url).href);
