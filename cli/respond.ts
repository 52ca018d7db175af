import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { ServerStatus } from "../gen/replay/servers/v1/servers_pb.js";
import { CliError } from "./output.js";

// Helpers that turn service answers into replayctl output.

/** A field the service must always set; its absence is a service fault, not an operator error. */
export function present<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new CliError("INTERNAL_ERROR", `the service answered without ${what}`);
  return value;
}

export function iso(ts: Timestamp | undefined, what: string): string {
  return timestampDate(present(ts, what)).toISOString();
}

export function isoOrNull(ts: Timestamp | undefined): string | null {
  return ts ? timestampDate(ts).toISOString() : null;
}

export function statusName(status: ServerStatus): "online" | "offline" {
  if (status === ServerStatus.ONLINE) return "online";
  if (status === ServerStatus.OFFLINE) return "offline";
  throw new CliError("INTERNAL_ERROR", "the service answered without a server status");
}
