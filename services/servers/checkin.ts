import { buildEvent } from "../../lib/bus/events.js";
import { type Batcher, createBatcher } from "../../lib/db/batch.js";
import { isDataException } from "../../lib/db/errors.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import type { TraceContext } from "../../lib/trace.js";
import * as store from "./store.js";

/** `pluginVersion` is "" when not sent. */
export type CheckIn = { serverId: string; at: Date; pluginVersion: string; trace?: TraceContext | undefined };

/** One write per server, leaving each row as applying the batch in order would. */
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

/** One statement at a time, so the calls that arrive while it runs go together into the next. */
const CHECK_IN_BATCH_MAX = 256;
const CHECK_IN_BATCHES_RUNNING_MAX = 1;

/** Undefined when it succeeded. */
export type CheckInOutcome = { error: unknown } | undefined;

/** Each check-in gets the outcome it would have had alone. */
export function createCheckIns(db: Db): Batcher<CheckIn, Promise<CheckInOutcome>> {
  return createBatcher<CheckIn, Promise<CheckInOutcome>>({
    run: (batch) => checkInBatch(db, batch),
    maxBatch: CHECK_IN_BATCH_MAX,
    maxRunning: CHECK_IN_BATCHES_RUNNING_MAX,
    // One check-in's value that Postgres refuses fails it alone.
    isolate: isDataException,
  });
}

/** Heartbeats are one statement ending the batch's turn; first check-ins and refusals then run alone, in order. */
async function checkInBatch(db: Db, batch: readonly CheckIn[]): Promise<Promise<CheckInOutcome>[]> {
  const seen = await store.updateServersSeen(db, foldCheckIns(batch));
  const previous = new Map<string, Promise<CheckInOutcome>>();
  return batch.map((checkIn) => {
    if (seen.has(checkIn.serverId)) return Promise.resolve(undefined);
    // The first of a server missed the statement; a later one follows it as a call of its own would.
    const before = previous.get(checkIn.serverId);
    const outcome = (before ? before.then(() => checkInAlone(db, checkIn)) : connectOrRefuse(db, checkIn)).then(
      () => undefined,
      (error: unknown) => ({ error }),
    );
    previous.set(checkIn.serverId, outcome);
    return outcome;
  });
}

async function checkInAlone(db: Db, checkIn: CheckIn): Promise<void> {
  if (!(await store.updateServerSeen(db, checkIn.serverId, checkIn.at, checkIn.pluginVersion)))
    await connectOrRefuse(db, checkIn);
}

async function connectOrRefuse(db: Db, { serverId, at, pluginVersion, trace }: CheckIn): Promise<void> {
  await db.transaction(
    async (tx) => {
      const row = await store.findServerForCheckIn(tx, serverId, true);
      if (!row) throw new DomainError("SERVER_NOT_FOUND", `no server ${serverId}`);
      if (row.state === "deauthorised")
        throw new DomainError("SERVER_DEAUTHORISED", `server ${serverId} was deauthorised`);
      if (row.state === "pending") {
        await store.updateServerConnected(tx, serverId, at, pluginVersion);
        await store.enqueueEvent(tx, buildEvent("servers.server.connected", { tenantId: row.tenant_id, serverId }));
      } else {
        // Connected since the batch's UPDATE. On this transaction, which holds the row lock (never the pool).
        await store.updateServerSeen(tx, serverId, at, pluginVersion);
      }
    },
    { trace },
  );
}
