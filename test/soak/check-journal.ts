import type { FaultWindow } from "./faults.js";
import { type Invariant, invariant, result } from "./invariant.js";
import type { Entry } from "./journal.js";

/**
 * What the journal alone shows: no answer a fault may excuse is a 5xx other than 503
 * (SERVICE_UNAVAILABLE is the contract's answer for an unreachable backend) nor a gRPC INTERNAL
 * or UNKNOWN, whatever failed; and the latency of requests away from any fault.
 */
const GRACE_MS = 5_000;

export function checkJournal(entries: readonly Entry[], windows: readonly FaultWindow[]) {
  const describe = (e: Entry) =>
    `${new Date(e.startMs).toISOString().slice(11, 23)} ${e.op} ${e.target ?? ""} -> ${e.status} ${e.code ?? ""}`.replace(
      /\s+/g,
      " ",
    );
  const http5xx = invariant("no HTTP 5xx other than 503");
  const grpcFault = invariant("no gRPC INTERNAL or UNKNOWN");
  for (const e of entries) {
    if (e.via === "http")
      http5xx.check(!(typeof e.status === "number" && e.status >= 500 && e.status !== 503), () => describe(e));
    else grpcFault.check(e.status !== "INTERNAL" && e.status !== "UNKNOWN", () => describe(e));
  }
  const calm = entries.filter((e) => !windows.some((w) => e.endMs >= w.startMs && e.startMs <= w.endMs + GRACE_MS));
  const ms = calm.map((e) => e.endMs - e.startMs).sort((a, b) => a - b);
  const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? 0;
  return {
    invariants: [http5xx, grpcFault].map(result) as Invariant[],
    latency: { calmRequests: ms.length, p50Ms: at(0.5), p99Ms: at(0.99) },
  };
}
