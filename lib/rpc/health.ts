import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";

/**
 * grpc.health.v1.Health for one process. `services` are the fully-qualified service names served
 * (each reported with the process's readiness); the empty name is the process as a whole.
 * `isReady` checks the dependencies (database, bus); it must be cheap.
 */
export function createHealthService(
  services: readonly string[],
  isReady: () => Promise<boolean>,
): ServiceImpl<typeof Health> {
  const known = new Set(["", ...services]);
  const status = async () => ((await isReady().catch(() => false)) ? Status.SERVING : Status.NOT_SERVING);
  return {
    async check(req) {
      if (!known.has(req.service)) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
      return { status: await status() };
    },
    async list() {
      const current = await status();
      return { statuses: Object.fromEntries([...known].map((name) => [name, { status: current }])) };
    },
    async *watch(req, ctx) {
      if (!known.has(req.service)) {
        yield { status: Status.SERVICE_UNKNOWN };
        return;
      }
      let last: Status | undefined;
      while (!ctx.signal.aborted) {
        const current = await status();
        if (current !== last) yield { status: current };
        last = current;
        await new Promise((resolve) => setTimeout(resolve, 1000).unref());
      }
    },
  };
}
