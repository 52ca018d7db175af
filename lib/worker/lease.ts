import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { Queryable } from "../db/types.js";
import { assertSchemaName } from "../db/types.js";

/**
 * Work claimed by one worker replica for a while. A table that is worked through leases has the
 * columns `lease_owner text` and `lease_expires_at timestamptz`; a claim takes ready rows whose
 * lease is free or expired with `FOR UPDATE SKIP LOCKED`, so replicas never claim the same row at
 * once, and a replica that dies only delays its rows until the lease runs out. Unlike a row lock
 * held by an open transaction, a lease lets the work itself (an HTTP delivery of up to 15 s) run
 * outside any transaction.
 */
export type LeaseTable = {
  /** Schema-qualified table, e.g. `webhooks.delivery`. */
  table: string;
  /** Its primary-key column. */
  key: string;
  /** SQL condition (a constant of the store, never input) that makes a row ready, e.g. `next_attempt_at <= now()`. */
  ready: string;
  /** SQL ORDER BY list (a constant of the store) of which ready rows go first. */
  order: string;
};

/** A name for this process's leases, unique across replicas and restarts. */
export function newLeaseOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}

function qualifiedName(name: string): string {
  return name.split(".").map(assertSchemaName).join(".");
}

/** Claims up to `limit` ready rows for `owner` for `leaseMs`; returns the claimed rows. */
export async function claimLeases<R>(
  q: Queryable,
  spec: LeaseTable,
  claim: { owner: string; leaseMs: number; limit: number },
): Promise<R[]> {
  const table = qualifiedName(spec.table);
  const key = assertSchemaName(spec.key);
  const { rows } = await q.query<R>(
    `UPDATE ${table} AS t
        SET lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond'
      WHERE t.${key} IN (
        SELECT ${key} FROM ${table}
         WHERE (${spec.ready}) AND (lease_expires_at IS NULL OR lease_expires_at <= now())
         ORDER BY ${spec.order}
         LIMIT $3
         FOR UPDATE SKIP LOCKED)
     RETURNING t.*`,
    [claim.owner, claim.leaseMs, claim.limit],
  );
  return rows;
}

/** Gives rows back at once (done, or handed back on stop); only the owner's own leases are released. */
export async function releaseLeases(
  q: Queryable,
  spec: Pick<LeaseTable, "table" | "key">,
  owner: string,
  keys: readonly unknown[],
): Promise<number> {
  const table = qualifiedName(spec.table);
  const key = assertSchemaName(spec.key);
  const { rowCount } = await q.query(
    `UPDATE ${table} SET lease_owner = NULL, lease_expires_at = NULL
      WHERE ${key} = ANY($1) AND lease_owner = $2`,
    [keys, owner],
  );
  return rowCount;
}
