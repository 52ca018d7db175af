import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createTestDb } from "../db/_testing.js";
import { migrate } from "../db/migrate.js";
import { outboxMigrations } from "./outbox.js";
import { pruneEventTables } from "./retention.js";

const hour = 3_600_000;

describe("event retention", () => {
  it("deletes published outbox rows and inbox rows past their windows, and nothing else", async () => {
    await using testDb = await createTestDb("bus_retention_test");
    const { db } = testDb;
    await migrate(db, outboxMigrations(db.schema));
    const [oldPublished, recentPublished, oldUnpublished] = [randomUUID(), randomUUID(), randomUUID()];
    await db.query(
      `INSERT INTO bus_retention_test.outbox (event_id, subject, payload, created_at, published_at)
       VALUES ($1, 's', '', now() - interval '30 hours', now() - interval '25 hours'),
              ($2, 's', '', now() - interval '2 hours', now() - interval '1 hour'),
              ($3, 's', '', now() - interval '30 hours', NULL)`,
      [oldPublished, recentPublished, oldUnpublished],
    );
    const [oldInbox, recentInbox] = [randomUUID(), randomUUID()];
    await db.query(
      `INSERT INTO bus_retention_test.inbox (consumer, event_id, processed_at)
       VALUES ('c', $1, now() - interval '49 hours'), ('c', $2, now() - interval '47 hours')`,
      [oldInbox, recentInbox],
    );

    expect(await pruneEventTables(db, { eventsMs: 24 * hour, inboxMs: 48 * hour })).toEqual({ outbox: 1, inbox: 1 });

    const outbox = await db.query<{ event_id: string }>("SELECT event_id FROM bus_retention_test.outbox");
    // An unpublished row is never pruned, however old: it has not reached the broker yet.
    expect(outbox.rows.map((row) => row.event_id).sort()).toEqual([recentPublished, oldUnpublished].sort());
    const inbox = await db.query<{ event_id: string }>("SELECT event_id FROM bus_retention_test.inbox");
    expect(inbox.rows.map((row) => row.event_id)).toEqual([recentInbox]);
  });
});
