import { describe, expect, it } from "vitest";
import { provisionTenant, send } from "../http.js";
import { distributedSkipReason, startDistributedSystem } from "../system.js";
import { useSystem } from "../use-system.js";

// decisions.md §1: a backend service that cannot be reached -> 503 SERVICE_UNAVAILABLE within the
// request deadline, with no internal detail; operations.md: /readyz reports it, /healthz does not.
describe.skipIf(distributedSkipReason())(
  "a backend service that is down (distributed mode; skipped without DATABASE_URL and NATS_URL: it kills one process of five)",
  () => {
    const system = useSystem(() => startDistributedSystem());

    it("answers 503 SERVICE_UNAVAILABLE at once, reports not ready, and keeps serving what does not need it", async () => {
      const sys = system();
      const t = await provisionTenant(sys);
      expect((await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() })).status).toBe(200);
      await sys.kill("servers");

      const startedAt = performance.now();
      const res = await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() });
      const elapsedMs = performance.now() - startedAt;
      expect(res.status, res.text).toBe(503);
      expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 503, code: "SERVICE_UNAVAILABLE" });
      expect(res.text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|servers\.v1|stack/i);
      // A refused connection is known at once; the 10 s deadline is only for a backend that hangs.
      expect(elapsedMs).toBeLessThan(5_000);

      const ready = await send(sys.baseUrl, "GET", "/readyz");
      expect(ready.status).toBe(503);
      // The operator sees which dependency it is, and nothing of where it is.
      expect(ready.body).toMatchObject({ code: "SERVICE_UNAVAILABLE", detail: "not ready: servers service" });
      expect((await send(sys.baseUrl, "GET", "/healthz")).status).toBe(200);
      // Authentication does not depend on the servers service.
      expect((await send(sys.baseUrl, "GET", "/v1/api/servers")).body?.code).toBe("UNAUTHENTICATED");
      expect((await send(sys.baseUrl, "GET", "/v1/api/replays", { headers: t.bearer() })).status).toBe(200);
    });
  },
);
