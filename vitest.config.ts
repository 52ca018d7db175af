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
  },
});
