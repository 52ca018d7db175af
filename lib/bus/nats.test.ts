import { randomBytes, randomUUID } from "node:crypto";
import { connect, StorageType } from "nats";
import { describe, expect, inject, it, onTestFinished } from "vitest";
import { waitFor } from "../../test/poll.js";
import { consumerRedeliveries } from "../metrics.js";
import { createNatsTestBus, deleteNamespaceStreams, describeBusContract, recorder } from "./_testing.js";
import { createNatsBus, isNatsUnreachable, natsStreamName } from "./nats.js";

// A NATS server with JetStream: NATS_URL, or the one the test run started from the nats-server binary.
const servers = inject("natsUrl");

describe.skipIf(!servers)("NATS JetStream bus (skipped: no NATS_URL and no nats-server binary)", () => {
  describeBusContract(() => createNatsTestBus(servers));

  it("creates the producers' streams with file storage and a two-minute duplicate window, even when started twice at once", async () => {
    const namespace = `t${randomBytes(6).toString("hex")}`;
    onTestFinished(() => deleteNamespaceStreams(servers, namespace));
    const buses = await Promise.all([1, 2, 3].map(() => createNatsBus({ servers, namespace })));
    onTestFinished(() => Promise.all(buses.map((bus) => bus.close())).then(() => {}));

    const nc = await connect({ servers });
    onTestFinished(() => nc.close());
    const jsm = await nc.jetstreamManager();
    for (const producer of ["identity", "servers", "replays"] as const) {
      const { config } = await jsm.streams.info(natsStreamName(producer, namespace));
      expect(config.subjects).toEqual([`${namespace}.${producer}.>`]);
      expect(config.storage).toBe(StorageType.File);
      expect(config.duplicate_window).toBeGreaterThanOrEqual(120_000_000_000);
    }
  });

  it("gives the streams the configured max age (EVENT_RETENTION), and updates a stream made with another", async () => {
    const namespace = `t${randomBytes(6).toString("hex")}`;
    onTestFinished(() => deleteNamespaceStreams(servers, namespace));
    const nc = await connect({ servers });
    onTestFinished(() => nc.close());
    const jsm = await nc.jetstreamManager();
    const maxAge = async () => (await jsm.streams.info(natsStreamName("servers", namespace))).config.max_age;

    const first = await createNatsBus({ servers, namespace, maxAgeMs: 7 * 86_400_000 });
    await first.close();
    expect(await maxAge()).toBe(7 * 86_400_000 * 1_000_000);
    // A later release (or replica) with another window brings the existing stream to it.
    const second = await createNatsBus({ servers, namespace, maxAgeMs: 3_600_000 });
    await second.close();
    expect(await maxAge()).toBe(3_600_000 * 1_000_000);
  });

  it("handles up to `concurrency` messages of one subject at once, acking each when its handler is done", async () => {
    await using t = await createNatsTestBus(servers);
    let running = 0;
    let most = 0;
    const done: string[] = [];
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    onTestFinished(
      await t.bus.subscribe(
        "concurrent",
        ["replays.asset.ready"],
        async (msg) => {
          running++;
          most = Math.max(most, running);
          await gate;
          running--;
          done.push(msg.eventId);
        },
        { concurrency: 4 },
      ),
    );
    const ids = Array.from({ length: 12 }, () => randomUUID());
    for (const id of ids) await t.bus.publish("replays.asset.ready", id, new Uint8Array());
    // Handlers hold until all twelve are published and four run at once: a latch, not a 50 ms
    // handler that a slow publisher could outlast (then no two ever overlapped). A consumer past
    // its bound has started more than four by now; one below it never gets to four.
    await waitFor("four handlers running at once", () => running >= 4);
    open();
    await waitFor("every message", () => done.length === ids.length);
    expect(most).toBe(4);
    expect([...done].sort()).toEqual([...ids].sort());
  });

  it("says which deliveries of a message are redeliveries", async () => {
    await using t = await createNatsTestBus(servers);
    const seen: (boolean | undefined)[] = [];
    onTestFinished(
      await t.bus.subscribe("redelivered", ["replays.asset.ready"], async (msg) => {
        seen.push(msg.redelivered);
        if (seen.length === 1) throw new Error("transient failure");
      }),
    );
    await t.bus.publish("replays.asset.ready", randomUUID(), new Uint8Array());
    await waitFor("the redelivery", () => seen.length === 2, 10_000);
    expect(seen).toEqual([false, true]);
    // Counted by durable, the label replay_consumer_pending and the alert use.
    const counted = (await consumerRedeliveries.get()).values.find((v) => v.labels.durable === "redelivered");
    expect(counted?.value).toBe(1);
  });

  it("keeps namespaces apart on one server", async () => {
    await using a = await createNatsTestBus(servers);
    await using b = await createNatsTestBus(servers);
    const inA = recorder();
    const inB = recorder();
    onTestFinished(await a.bus.subscribe("isolated", ["servers.server.created"], inA.handler));
    onTestFinished(await b.bus.subscribe("isolated", ["servers.server.created"], inB.handler));
    const forA = randomUUID();
    const forB = randomUUID();
    await a.bus.publish("servers.server.created", forA, new Uint8Array());
    await b.bus.publish("servers.server.created", forB, new Uint8Array());
    await waitFor("both events", () => inA.received.length > 0 && inB.received.length > 0);
    expect(inA.ids()).toEqual([forA]);
    expect(inB.ids()).toEqual([forB]);
  });

  it("sends the event id as Nats-Msg-Id on the namespaced subject", async () => {
    const namespace = `t${randomBytes(6).toString("hex")}`;
    onTestFinished(() => deleteNamespaceStreams(servers, namespace));
    const bus = await createNatsBus({ servers, namespace });
    onTestFinished(() => bus.close());
    const eventId = randomUUID();
    await bus.publish("replays.asset.ready", eventId, new TextEncoder().encode("payload"));
    await bus.publish("replays.asset.ready", eventId, new TextEncoder().encode("payload"));

    const nc = await connect({ servers });
    onTestFinished(() => nc.close());
    const jsm = await nc.jetstreamManager();
    const stream = natsStreamName("replays", namespace);
    expect((await jsm.streams.info(stream)).state.messages).toBe(1);
    const stored = await jsm.streams.getMessage(stream, { seq: 1 });
    expect(stored.subject).toBe(`${namespace}.replays.asset.ready`);
    expect(stored.header.get("Nats-Msg-Id")).toBe(eventId);
    expect(new TextDecoder().decode(stored.data)).toBe("payload");
  });
});

describe("isNatsUnreachable", () => {
  it("waits for a server that resets the connection while it starts, not for a refusal of another kind", () => {
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    expect(isNatsUnreachable(reset)).toBe(true);
    expect(isNatsUnreachable(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))).toBe(true);
    expect(isNatsUnreachable(Object.assign(new Error("bad auth"), { code: "AUTHORIZATION_VIOLATION" }))).toBe(false);
  });
});
