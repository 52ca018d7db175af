import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServerStatus } from "../../gen/replay/servers/v1/servers_pb.js";
import type { Db } from "../../lib/db/types.js";
import { traceOf } from "../../lib/rpc/context.js";
import { createCheckIns } from "./checkin.js";
import { checkInTime, parseServerId } from "./setup.js";
import { isOnline } from "./status.js";

export type RecorderDeps = { db: Db; now: () => Date };

/** spec "Server status": the status is derived from lastSeenAt at read time, never by a timer. */
export function createRecorderService(deps: RecorderDeps): ServiceImpl<typeof RecorderService> {
  const checkIn = createCheckIns(deps.db);
  return {
    async checkIn(req, ctx) {
      const serverId = parseServerId(req.serverId);
      const now = deps.now();
      const at = checkInTime(req.at, now);
      const outcome = await checkIn({ serverId, at, pluginVersion: req.pluginVersion, trace: traceOf(ctx) });
      if (outcome) throw outcome.error;
      return {
        serverId,
        status: isOnline("connected", at, now) ? ServerStatus.ONLINE : ServerStatus.OFFLINE,
        lastSeenAt: timestampFromDate(at),
      };
    },
  };
}
