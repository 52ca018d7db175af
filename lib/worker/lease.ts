import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/**
 * Unlike a row lock held by an open transaction, a lease lets the work (an HTTP delivery) run outside any
 * transaction; a replica that dies only delays its rows until the lease runs out.
 */

/** A name for this process's leases, unique across replicas and restarts. */
export function newLeaseOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
}
