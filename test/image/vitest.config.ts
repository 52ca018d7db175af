import { defineConfig } from "vitest/config";

// `npm run test:image` only (test/image/run.sh): the checks of the built image, one file, in order.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/image/*.check.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
