import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Outbox, OutboxService } from "../../gen/replay/ops/v1/ops_pb.js";
import type { Db } from "../db/types.js";
import { outboxBacklog } from "./outbox.js";

/** An outbox as OutboxService answers it. */
export type OutboxReport = Omit<Outbox, "$typeName">;

/** The schema's outbox: its unpublished events and the oldest of them. */
export async function outboxReport(db: Db): Promise<OutboxReport> {
  const status = await outboxBacklog(db, db.schema);
  return {
    schema: db.schema,
    unpublished: BigInt(status.backlog),
    oldestEventId: status.oldest?.eventId ?? "",
    oldestSubject: status.oldest?.subject ?? "",
    oldestCreatedAt: status.oldest ? timestampFromDate(status.oldest.createdAt) : undefined,
  };
}

/** OutboxService (replayctl outbox status) over whatever outboxes `read` reports, in schema order. */
export function createOutboxService(read: () => Promise<OutboxReport[]>): ServiceImpl<typeof OutboxService> {
  return {
    async outboxStatus() {
      const outboxes = await read();
      return { outboxes: [...outboxes].sort((a, b) => (a.schema < b.schema ? -1 : a.schema > b.schema ? 1 : 0)) };
    },
  };
}
