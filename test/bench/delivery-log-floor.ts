import pg from "pg";
import { processCpuMs } from "./proc.js";

/**
 * The least a delivery log can cost that we know of, for the webhooks benchmark's floor: each
 * event's body stored once, one narrow row per delivery (its one attempt inline, no lease, schedule
 * or counters), written after the send in multi-row statements, one in flight, as many rows each
 * as have finished meanwhile; durable commits, as the service's. Its own tables in `bench_floor`.
 */
export type DeliveryLogFloor = {
  record(eventId: string, body: string, url: string, statusCode: number, timestampS: number): void;
  /**
   * Writes what is left, then disconnects; returns its Postgres backend's CPU time (ms), read
   * before the backend exits with the connection, which the bench's own reading would miss.
   */
  close(): Promise<number>;
};

export async function openDeliveryLogFloor(databaseUrl: string): Promise<DeliveryLogFloor> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "bench-floor-log" });
  await client.connect();
  const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const backendPid = rows[0]?.pid ?? 0;
  const backendCpuAtStart = processCpuMs(backendPid) ?? 0;
  await client.query(`
    CREATE SCHEMA IF NOT EXISTS bench_floor;
    DROP TABLE IF EXISTS bench_floor.delivery, bench_floor.event;
    CREATE TABLE bench_floor.event (event_id uuid PRIMARY KEY, body text NOT NULL);
    CREATE TABLE bench_floor.delivery (
      delivery_id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      event_id uuid NOT NULL,
      url text NOT NULL,
      status_code integer NOT NULL,
      attempted_at timestamptz NOT NULL
    )`);
  const logged = new Set<string>();
  let pending: { eventId: string; body: string; url: string; statusCode: number; timestampS: number }[] = [];
  let writing: Promise<void> | undefined;

  const writeAll = async () => {
    while (pending.length > 0) {
      const rows = pending;
      pending = [];
      const events = rows.filter((r) => !logged.has(r.eventId) && logged.add(r.eventId));
      // One JSON text per statement: cheaper to build than pg's array literals.
      await client.query(
        `WITH e AS (
           INSERT INTO bench_floor.event SELECT * FROM json_to_recordset($1::json) AS e(event_id uuid, body text)
           ON CONFLICT DO NOTHING
         )
         INSERT INTO bench_floor.delivery (event_id, url, status_code, attempted_at)
         SELECT event_id, url, status_code, to_timestamp(ts)
           FROM json_to_recordset($2::json) AS d(event_id uuid, url text, status_code int, ts bigint)`,
        [
          JSON.stringify(events.map((r) => ({ event_id: r.eventId, body: r.body }))),
          JSON.stringify(
            rows.map((r) => ({ event_id: r.eventId, url: r.url, status_code: r.statusCode, ts: r.timestampS })),
          ),
        ],
      );
    }
    writing = undefined;
  };

  return {
    record(eventId, body, url, statusCode, timestampS) {
      pending.push({ eventId, body, url, statusCode, timestampS });
      writing ??= writeAll();
    },
    async close() {
      await writing;
      await writeAll();
      const backendCpuMs = (processCpuMs(backendPid) ?? 0) - backendCpuAtStart;
      await client.end();
      return backendCpuMs;
    },
  };
}
