import { randomUUID } from "node:crypto";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { outboxMigrations } from "../../lib/bus/outbox.js";
import { testDbModes } from "../../lib/db/_testing.js";
import { migrate, readMigrations } from "../../lib/db/migrate.js";
import { sourceFolder } from "../../lib/paths.js";
import { errorInterceptor } from "../../lib/rpc/errors.js";
import { createRecorderService } from "./service.js";
import * as store from "./store.js";

// The recorder service's handlers behind the real error interceptor, on the real schema.
describe.each(testDbModes())("recorder check-in ($name database)", ({ open }) => {
  it("connects a pending setup once when 20 first check-ins race, and answers every one within a second", async () => {
    await using testDb = await open("servers");
    const { db } = testDb;
    await migrate(db, [
      ...outboxMigrations("servers"),
      ...(await readMigrations(sourceFolder(import.meta.url, "./migrations"))),
    ]);
    const tenantId = randomUUID();
    const serverId = randomUUID();
    await db.transaction((tx) =>
      store.insertServer(tx, { serverId, tenantId, name: "race", categoryId: null, sourceServerId: null }),
    );
    const recorder = createClient(
      RecorderService,
      createRouterTransport(
        (router) => router.service(RecorderService, createRecorderService({ db, now: () => new Date() })),
        { router: { interceptors: [errorInterceptor] } },
      ),
    );

    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        recorder.checkIn({ serverId, pluginVersion: "1.0.0" }, { signal: AbortSignal.timeout(1000) }),
      ),
    );
    expect(performance.now() - started).toBeLessThan(1000);
    expect(answers.map((answer) => answer.serverId)).toEqual(Array(20).fill(serverId));

    const { rows } = await db.query<{ subject: string }>("SELECT subject FROM servers.outbox");
    expect(rows).toEqual([{ subject: "servers.server.connected" }]);
    expect((await store.findServerById(db, tenantId, serverId))?.state).toBe("connected");
  });
});
