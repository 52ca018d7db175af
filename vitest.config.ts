import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    exclude: ["node_modules/**", "dist/**"],
    // Files share one Postgres and one NATS; each isolates itself (own database, own subjects),
    // and two forks keep this 2-core machine responsive.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Test files share a worker process in turn (no fresh process and module graph per file): they
    // keep no module state that one could leak to another, and a run takes about 3 s less.
    isolate: false,
  },
});
