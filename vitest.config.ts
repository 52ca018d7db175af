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
    // Deadlines for tests that hang, not measures of speed: beside a CPU hog (load average ~25 on
    // these 2 cores) a webhooks worker test that takes 2 s idle took over 30 s.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Test files share a worker process in turn (no fresh process and module graph per file): they
    // keep no module state that one could leak to another, and a run takes about 3 s less.
    isolate: false,
  },
});
