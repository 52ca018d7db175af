import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * Work claimed by one worker replica for a while. A table that is worked through leases has the
 * columns `lease_owner text` and `lease_expires_at timestamptz`; a claim takes ready rows whose
 * lease is free or expired with `FOR UPDATE SKIP LOCKED`, so replicas never claim the same row at
 * once, and a replica that dies only delays its rows until the lease runs out. Unlike a row lock
 * held by an open transaction, a lease lets the work itself (an HTTP delivery of up to 15 s) run
 * outside any transaction. The claim itself is the store's (services/webhooks/store.ts
 * claimDeliveries: its per-subscription caps and manual queue are no generic claim's).
 */

/** A name for this process's leases, unique across replicas and restarts. */
export function newLeaseOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}
