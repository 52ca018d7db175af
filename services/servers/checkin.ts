import { buildEvent } from "../../lib/bus/events.js";
import { type Batcher, createBatcher } from "../../lib/db/batch.js";
import { isDataException } from "../../lib/db/errors.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import type { TraceContext } from "../../lib/trace.js";
import * as store from "./store.js";

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

/**
 * The most check-ins in one statement, and the statements at once: one, so that the calls that
 * arrive while it runs go together into the next (measured: bigger batches, less Postgres CPU per
 * check-in and no worse latency than two or four at once).
 */
const CHECK_IN_BATCH_MAX = 256;
const CHECK_IN_BATCHES_RUNNING_MAX = 1;

/** A check-in's outcome within its batch: undefined when it succeeded, else the error its caller gets. */
export type CheckInOutcome = { error: unknown } | undefined;

/**
 * Check-ins in batches: the calls that arrive while a batch runs go together into the next, each
 * with the outcome it would have had alone (checkInBatch).
 */
export function createCheckIns(db: Db): Batcher<CheckIn, Promise<CheckInOutcome>> {
  return createBatcher<CheckIn, Promise<CheckInOutcome>>({
    run: (batch) => checkInBatch(db, batch),
    maxBatch: CHECK_IN_BATCH_MAX,
    maxRunning: CHECK_IN_BATCHES_RUNNING_MAX,
    // One check-in's value that Postgres refuses fails it alone, as it did before batching.
    isolate: isDataException,
  });
}

/**
 * One batch of check-ins, each with the outcome it would have had alone, as if they ran one after
 * another in the batch's order. The heartbeats of connected servers are one statement for the
 * whole batch, and the batch's turn ends with it. The rest (a pending setup's first check-in, or a
 * refusal) then run each on its own, those of one server one after another in the batch's order;
 * their callers get them through the promises returned. A failure of the statement fails the batch.
 */
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

/** A check-in on its own: the heartbeat's one-row UPDATE, else the connect or the refusal. */
async function checkInAlone(db: Db, checkIn: CheckIn): Promise<void> {
  if (!(await store.updateServerSeen(db, checkIn.serverId, checkIn.at, checkIn.pluginVersion)))
    await connectOrRefuse(db, checkIn);
}

/** A check-in of a server that is not connected: connects a pending setup, refuses the others. */
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
        // Connected since the batch's UPDATE: by a concurrent first check-in, or an earlier one of the
        // batch. The update runs on this transaction, which holds the row lock (never on the pool).
        await store.updateServerSeen(tx, serverId, at, pluginVersion);
      }
    },
    { trace },
  );
}
