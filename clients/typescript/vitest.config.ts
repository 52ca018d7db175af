import { defineConfig } from "vitest/config";

// The package's own tests (`npm test` here): no running system, only the built package and a local
// HTTP server. The repository's root run includes them too.
export default defineConfig({ test: { include: ["test/**/*.test.ts"] } });
