import type { TraceContext } from "../../lib/trace.js";

/**
 * One recorder check-in, parsed: the server, when it was seen, its plugin version ("" when not
 * sent), and the trace hop of its call (for the event a first check-in enqueues).
 */
export type CheckIn = { serverId: string; at: Date; pluginVersion: string; trace?: TraceContext | undefined };

/**
 * The check-ins of one batch as one write per server, leaving each row as applying them one after
 * another in the batch's order would: the last `at`, and the last plugin version sent (a check-in
 * without one keeps the stored version). Servers keep the order of their first check-in.
 */
export function foldCheckIns(checkIns: readonly CheckIn[]): CheckIn[] {
  const byServer = new Map<string, CheckIn>();
  for (const checkIn of checkIns) {
    const before = byServer.get(checkIn.serverId);
    byServer.set(checkIn.serverId, {
      serverId: checkIn.serverId,
      at: checkIn.at,
      pluginVersion: checkIn.pluginVersion === "" && before ? before.pluginVersion : checkIn.pluginVersion,
    });
  }
  return [...byServer.values()];
}
