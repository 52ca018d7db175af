import { connect } from "nats";
import pg from "pg";

/**
 * What is still in flight in the system, read from outside it: outbox rows not yet published,
 * JetStream messages not yet handled (pending or delivered and unacknowledged), deliveries not
 * yet terminal, and leases held. All zero means the system has settled.
 */
export type Backlog = {
  outboxUnsent: Record<string, number>;
  consumersPending: Record<string, number>;
  deliveriesPending: number;
  leasesHeld: Record<string, number>;
};

export function backlogTotal(b: Backlog): number {
  const sum = (r: Record<string, number>) => Object.values(r).reduce((a, n) => a + n, 0);
  return sum(b.outboxUnsent) + sum(b.consumersPending) + b.deliveriesPending + sum(b.leasesHeld);
}

export async function readBacklog(db: pg.Client, natsUrl: string, namespace: string): Promise<Backlog> {
  const outboxUnsent: Record<string, number> = {};
  const outboxes = await db.query<{ schema: string }>(
    "SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'outbox' ORDER BY 1",
  );
  for (const { schema } of outboxes.rows) {
    const r = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(schema)}.outbox WHERE published_at IS NULL`,
    );
    outboxUnsent[schema] = r.rows[0]?.n ?? 0;
  }
  // Every table worked through leases (lib/worker/lease.ts) has a lease_owner column.
  const leasesHeld: Record<string, number> = {};
  const leased = await db.query<{ schema: string; table: string }>(
    `SELECT table_schema AS schema, table_name AS table FROM information_schema.columns
      WHERE column_name = 'lease_owner' ORDER BY 1, 2`,
  );
  for (const { schema, table } of leased.rows) {
    const r = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)} WHERE lease_owner IS NOT NULL`,
    );
    leasesHeld[`${schema}.${table}`] = r.rows[0]?.n ?? 0;
  }
  const pending = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM webhooks.delivery WHERE status = 'pending'",
  );
  return {
    outboxUnsent,
    consumersPending: await consumersPending(natsUrl, namespace),
    deliveriesPending: pending.rows[0]?.n ?? 0,
    leasesHeld,
  };
}

/** Each durable consumer's messages not yet finished, over the namespace's streams. */
export async function consumersPending(natsUrl: string, namespace: string): Promise<Record<string, number>> {
  const nc = await connect({ servers: natsUrl, timeout: 3_000 });
  try {
    const jsm = await nc.jetstreamManager();
    const out: Record<string, number> = {};
    for await (const stream of jsm.streams.names()) {
      if (!stream.startsWith(`${namespace}_`)) continue;
      for await (const info of jsm.consumers.list(stream)) {
        out[`${stream}/${info.name}`] = info.num_pending + info.num_ack_pending;
      }
    }
    return out;
  } finally {
    await nc.close();
  }
}

/**
 * Polls the backlog until it is empty twice in a row (a second look catches work a first one saw
 * between two steps) or `deadlineMs` passes; resolves to the last backlog and how long it took.
 */
export async function waitForDrain(deps: {
  databaseUrl: string;
  natsUrl: string;
  namespace: string;
  deadlineMs: number;
}): Promise<{ drained: boolean; ms: number; backlog: Backlog | undefined; error?: string }> {
  const start = Date.now();
  let last: Backlog | undefined;
  let error: string | undefined;
  let emptyInARow = 0;
  while (Date.now() - start < deps.deadlineMs) {
    const db = new pg.Client({ connectionString: deps.databaseUrl });
    try {
      await db.connect();
      last = await readBacklog(db, deps.natsUrl, deps.namespace);
      error = undefined;
      emptyInARow = backlogTotal(last) === 0 ? emptyInARow + 1 : 0;
      if (emptyInARow >= 2) return { drained: true, ms: Date.now() - start, backlog: last };
    } catch (err) {
      error = (err as Error).message;
    } finally {
      await db.end().catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  return { drained: false, ms: Date.now() - start, backlog: last, ...(error ? { error } : {}) };
}
