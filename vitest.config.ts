import { configDefaults, defineConfig } from "vitest/config";

/**
 * The layers (docs/engineering.md "Tests"); `npm test` runs them all, `npm run test:<layer>` one.
 * - unit: no system, no database, no NATS (rules, codecs, SQL builders, in-process servers on
 *   loopback): `npm run test:unit` answers in seconds with nothing running. Listed here.
 * - integration: one process, with a database of its own and NATS where needed (stores, the bus,
 *   the services in-process, the gateway's routes): the other test files beside the sources.
 * - e2e: the shared systems (test/global-setup.ts), for what only separate processes show: test/.
 * - slow: systems of their own, faults, toolchains and the embedded database's files. Listed here.
 * A new file lands in integration beside the sources and in e2e under test/ until listed otherwise.
 */
const UNIT = [
  "cli/commands.test.ts",
  "clients/typescript/test/retry.test.ts",
  "clients/typescript/test/types.test.ts",
  "gateway/auth/api-key.test.ts",
  "gateway/auth/key-cache.test.ts",
  "gateway/auth/scopes.test.ts",
  "gateway/auth/signature-header.test.ts",
  "gateway/openapi/document.test.ts",
  "gateway/problem.test.ts",
  "gateway/rate-limit.test.ts",
  "gateway/routes/json.test.ts",
  "lib/blob/blob.test.ts",
  "lib/db/batch.test.ts",
  "lib/db/timestamp.test.ts",
  "lib/ids.test.ts",
  "lib/member-role.test.ts",
  "lib/metrics.test.ts",
  "lib/page/keyset.test.ts",
  "lib/page/page.test.ts",
  "lib/rpc/binary-decoder.test.ts",
  "lib/rpc/binary-encoder.test.ts",
  "lib/rpc/h2-abuse.test.ts",
  "lib/rpc/server.test.ts",
  "lib/rpc/text-encoding.test.ts",
  "lib/rpc/text-guard.test.ts",
  "lib/secrets/box.test.ts",
  "lib/service-host.test.ts",
  "lib/shared-answer.test.ts",
  "lib/signing.test.ts",
  "lib/startup-wait.test.ts",
  "lib/timestamp-iso.test.ts",
  "lib/trace.test.ts",
  "lib/worker/worker.test.ts",
  "services/markers/marker.test.ts",
  "services/replays/archive.test.ts",
  "services/replays/transitions.test.ts",
  "services/servers/name.test.ts",
  "services/servers/setup.test.ts",
  "services/webhooks/delivery/address.test.ts",
  "services/webhooks/delivery/breaker.test.ts",
  "services/webhooks/delivery/deadline.test.ts",
  "services/webhooks/delivery/retry-after.test.ts",
  "services/webhooks/delivery/schedule.test.ts",
  "services/webhooks/delivery/signature.test.ts",
  "services/webhooks/delivery/slots.test.ts",
  "services/webhooks/delivery/webhook-url.test.ts",
  "test/bench/rounds.test.ts",
  "test/boundaries.test.ts",
  "test/grpc-clients-doc.test.ts",
  "test/monitoring.test.ts",
];

const SLOW = [
  "lib/data-dir.test.ts",
  "lib/db/embedded-template.test.ts",
  "lib/db/embedded.test.ts",
  "test/client-package.test.ts",
  "test/deploy.test.ts",
  "test/embedded.test.ts",
  "test/faults/**/*.test.ts",
  "test/internal-token.test.ts",
  "test/npm-start.test.ts",
  "test/readme-client.test.ts",
  "test/start.test.ts",
  "test/tracing.test.ts",
];

const BESIDE_SOURCES = ["lib", "services", "gateway", "cli", "clients"].map((dir) => `${dir}/**/*.test.ts`);
const NOT_OURS = [...configDefaults.exclude, "dist/**"];

export default defineConfig({
  test: {
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
    // npm run test:coverage: lines of our code run in the test processes (the systems' child
    // processes are not counted), as a figure to hold from one change to the next.
    coverage: {
      provider: "v8",
      include: ["lib/**/*.ts", "services/**/*.ts", "gateway/**/*.ts", "cli/**/*.ts", "clients/typescript/src/**/*.ts"],
      exclude: ["**/*.test.ts", "**/_testing.ts", "**/_samples.ts"],
      reporter: ["text-summary", "json-summary"],
      reportsDirectory: "coverage",
    },
    projects: [
      { extends: true, test: { name: "unit", include: UNIT } },
      {
        extends: true,
        test: {
          name: "integration",
          include: BESIDE_SOURCES,
          exclude: [...NOT_OURS, ...UNIT, ...SLOW],
          globalSetup: ["test/global-setup-resources.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/**/*.test.ts"],
          exclude: [...NOT_OURS, ...UNIT, ...SLOW],
          globalSetup: ["test/global-setup.ts"],
        },
      },
      {
        extends: true,
        test: { name: "slow", include: SLOW, exclude: NOT_OURS, globalSetup: ["test/global-setup-resources.ts"] },
      },
    ],
  },
});
