import { randomBytes, randomUUID } from "node:crypto";
import { connect } from "nats";
import { describe, expect, inject, it, onTestFinished } from "vitest";
import { waitFor } from "../../test/poll.js";
import { isUniqueViolation } from "../db/errors.js";
import type { Db } from "../db/types.js";
import { assertPublishSubject, type Bus, type BusHandler, type BusMessage } from "./bus.js";
import { createEmbeddedBus } from "./embedded.js";
import { createNatsBus } from "./nats.js";
import { enqueue } from "./outbox.js";

/**
 * A bus and, for tests of several processes, more connections to the same broker and namespace.
 * `emit` sends an event the way its producer does: through JetStream, or, on the embedded bus,
 * by committing it to the producer's outbox (an id already there is stored once, as JetStream's
 * duplicate window does).
 */
export type TestBus = {
  bus: Bus;
  connectPeer(): Promise<Bus>;
  emit(subject: string, eventId: string, data: Uint8Array): Promise<void>;
} & AsyncDisposable;

/**
 * A bus of its own for one test: with a NATS server (NATS_URL, or the one the test run started,
 * see test/global-setup.ts), JetStream under a random namespace whose streams are deleted on
 * dispose; without one, the embedded bus on the test's database (`openDb` opens a schema of it).
 */
export async function createTestBus(openDb: (schema: string) => Db): Promise<TestBus> {
  const servers = inject("natsUrl");
  return servers ? createNatsTestBus(servers) : createEmbeddedTestBus(openDb);
}

/**
 * The embedded bus; its peers are the bus itself, as every "process" shares it. Its readers never poll
 * within a test: what they deliver, enqueue's NOTIFY woke them for.
 */
export async function createEmbeddedTestBus(openDb: (schema: string) => Db): Promise<TestBus> {
  const bus = await createEmbeddedBus(openDb, { pollMs: 60 * 60_000 });
  return {
    bus,
    connectPeer: async () => bus,
    async emit(subject, eventId, data) {
      const producer = assertPublishSubject(subject);
      try {
        await openDb(producer).transaction((tx) => enqueue(tx, producer, { subject, eventId, payload: data }));
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
    },
    [Symbol.asyncDispose]: () => bus.close(),
  };
}

/** A JetStream bus under a random namespace; dispose closes it and its peers and deletes the streams. */
export async function createNatsTestBus(servers: string): Promise<TestBus> {
  const namespace = `t${randomBytes(6).toString("hex")}`;
  const bus = await createNatsBus({ servers, namespace, name: `test-${namespace}` });
  const peers: Bus[] = [];
  return {
    bus,
    emit: (subject, eventId, data) => bus.publish(subject, eventId, data),
    async connectPeer() {
      const peer = await createNatsBus({ servers, namespace, name: `test-${namespace}-peer` });
      peers.push(peer);
      return peer;
    },
    async [Symbol.asyncDispose]() {
      await Promise.all([bus, ...peers].map((b) => b.close()));
      await deleteNamespaceStreams(servers, namespace);
    },
  };
}

/** Deletes the streams `createNatsBus` made for `namespace`. */
export async function deleteNamespaceStreams(servers: string, namespace: string): Promise<void> {
  const nc = await connect({ servers: servers.split(",") });
  try {
    const jsm = await nc.jetstreamManager();
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(`${namespace}_`)) await jsm.streams.delete(name);
    }
  } finally {
    await nc.close();
  }
}

/** A handler that records what it receives, for tests. */
export function recorder(): { handler: BusHandler; received: BusMessage[]; ids(): string[] } {
  const received: BusMessage[] = [];
  return {
    handler: async (msg) => {
      received.push(msg);
    },
    received,
    ids: () => received.map((msg) => msg.eventId),
  };
}

const encode = (text: string) => new TextEncoder().encode(text);

/**
 * The guarantees of `Bus` that both adapters keep, run against a fresh bus per test from `open`.
 * Each test waits for a later "marker" event before it asserts that something did not happen, so
 * no assertion rests on a sleep.
 */
export function describeBusContract(open: () => Promise<TestBus>): void {
  describe("Bus contract", () => {
    it("delivers to a durable created later the events published before it existed", async () => {
      await using world = await open();
      const { bus } = world;
      const first = randomUUID();
      const second = randomUUID();
      await world.emit("servers.server.created", first, encode("one"));
      await world.emit("servers.server.created", second, encode("two"));
      const got = recorder();
      const stop = await bus.subscribe("late", ["servers.server.created"], got.handler);
      onTestFinished(stop);
      await waitFor("both events", () => got.received.length >= 2);
      expect(got.ids()).toEqual([first, second]);
      expect(got.received.map((msg) => new TextDecoder().decode(msg.data))).toEqual(["one", "two"]);
      expect(got.received.every((msg) => msg.subject === "servers.server.created")).toBe(true);
    });

    it("stores an event id published twice once", async () => {
      await using world = await open();
      const { bus } = world;
      const got = recorder();
      onTestFinished(await bus.subscribe("dedup", ["replays.replay.deleted"], got.handler));
      const twice = randomUUID();
      const marker = randomUUID();
      await world.emit("replays.replay.deleted", twice, encode("a"));
      await world.emit("replays.replay.deleted", twice, encode("a"));
      await world.emit("replays.replay.deleted", marker, encode("b"));
      await waitFor("the marker", () => got.ids().includes(marker));
      expect(got.ids()).toEqual([twice, marker]);
    });

    it("counts a durable's events not yet finished (its lag): waiting, and delivered but unsettled", async () => {
      await using world = await open();
      const { bus } = world;
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const got = recorder();
      onTestFinished(
        await bus.subscribe("lagging", ["replays.asset.ready"], async (msg) => {
          await held;
          await got.handler(msg);
        }),
      );
      for (let i = 0; i < 3; i++) await world.emit("replays.asset.ready", randomUUID(), encode(""));
      await world.emit("replays.asset.failed", randomUUID(), encode(""));
      await waitFor("three pending", async () => (await bus.pending("lagging", ["replays.asset.ready"])) === 3);
      release();
      await waitFor("all three handled", () => got.received.length === 3);
      await waitFor("none pending", async () => (await bus.pending("lagging", ["replays.asset.ready"])) === 0);
    });

    it("delivers only the subjects a durable subscribed to, wildcards included", async () => {
      await using world = await open();
      const { bus } = world;
      const got = recorder();
      onTestFinished(await bus.subscribe("filtered", ["replays.asset.*", "identity.key.revoked"], got.handler));
      const ready = randomUUID();
      const revoked = randomUUID();
      const other = randomUUID();
      await world.emit("replays.recording.started", other, encode(""));
      await world.emit("replays.asset.ready", ready, encode(""));
      await world.emit("identity.key.revoked", revoked, encode(""));
      await waitFor("both matching events", () => got.received.length >= 2);
      // The marker on the unwanted subject's own durable proves it was published before we assert.
      const all = recorder();
      onTestFinished(await bus.subscribe("everything", ["replays.>"], all.handler));
      await waitFor("the unwanted event elsewhere", () => all.ids().includes(other));
      expect(got.ids().sort()).toEqual([ready, revoked].sort());
      expect(got.received.find((msg) => msg.eventId === ready)?.subject).toBe("replays.asset.ready");
    });

    it("redelivers a message whose handler threw until it succeeds, with a delay", async () => {
      await using world = await open();
      const { bus } = world;
      const attempts: number[] = [];
      const eventId = randomUUID();
      let done = false;
      onTestFinished(
        await bus.subscribe("flaky", ["servers.server.purged"], async (msg) => {
          if (msg.eventId !== eventId) return;
          attempts.push(Date.now());
          if (attempts.length < 3) throw new Error("transient failure");
          done = true;
        }),
      );
      await world.emit("servers.server.purged", eventId, encode(""));
      await waitFor("the third attempt", () => done, 15_000);
      expect(attempts).toHaveLength(3);
      // Backoff: the second retry waits longer than nothing.
      expect((attempts[2] as number) - (attempts[1] as number)).toBeGreaterThan(20);
    });

    it("delivers a durable's events in publish order", async () => {
      await using world = await open();
      const { bus } = world;
      const ids = Array.from({ length: 30 }, () => randomUUID());
      for (const id of ids) await world.emit("servers.server.connected", id, encode(id));
      const got = recorder();
      onTestFinished(await bus.subscribe("ordered", ["servers.server.connected"], got.handler));
      await waitFor("all events", () => got.received.length >= ids.length);
      expect(got.ids()).toEqual(ids);
    });

    it("shares a durable's events among its subscribers, each handled once", async () => {
      await using world = await open();
      const peer = await world.connectPeer();
      const seen: string[] = [];
      const byWho = { one: 0, two: 0 };
      const handler = (who: keyof typeof byWho) => async (msg: BusMessage) => {
        seen.push(msg.eventId);
        byWho[who]++;
      };
      onTestFinished(await world.bus.subscribe("shared", ["identity.tenant.upserted"], handler("one")));
      onTestFinished(await peer.subscribe("shared", ["identity.tenant.upserted"], handler("two")));
      const ids = Array.from({ length: 60 }, () => randomUUID());
      for (const id of ids) await world.emit("identity.tenant.upserted", id, encode(""));
      await waitFor("all events", () => seen.length >= ids.length);
      expect([...seen].sort()).toEqual([...ids].sort());
      expect(byWho.one + byWho.two).toBe(ids.length);
    });

    it("keeps a durable's position across stop and resubscribe; stop waits for the running handler", async () => {
      await using world = await open();
      const { bus } = world;
      const first = randomUUID();
      const second = randomUUID();
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started = false;
      let finished = false;
      const stop = await bus.subscribe("resumable", ["replays.recording.finished"], async (msg) => {
        if (msg.eventId !== first) return;
        started = true;
        await gate;
        finished = true;
      });
      await world.emit("replays.recording.finished", first, encode(""));
      await waitFor("the handler to start", () => started);
      let stopped = false;
      const stopping = stop().then(() => {
        stopped = true;
      });
      await world.emit("replays.recording.finished", second, encode(""));
      expect(stopped).toBe(false);
      release();
      await stopping;
      expect(finished).toBe(true);

      const got = recorder();
      onTestFinished(await bus.subscribe("resumable", ["replays.recording.finished"], got.handler));
      await waitFor("the event published during stop", () => got.ids().includes(second));
      expect(got.ids()).not.toContain(first);
    });

    it("broadcasts every event published after subscribing to every subscriber", async () => {
      await using world = await open();
      const peer = await world.connectPeer();
      const before = randomUUID();
      await world.bus.publish("identity.key.revoked", before, encode(""));
      const a = recorder();
      const b = recorder();
      onTestFinished(await world.bus.broadcast(["identity.key.revoked"], a.handler));
      onTestFinished(await peer.broadcast(["identity.key.*"], b.handler));
      const after = randomUUID();
      await world.bus.publish("identity.key.revoked", after, encode("k"));
      await waitFor("both subscribers", () => a.ids().includes(after) && b.ids().includes(after));
      expect(a.ids()).toEqual([after]);
      expect(b.ids()).toEqual([after]);
      expect(b.received[0]?.subject).toBe("identity.key.revoked");
    });

    it("refuses subjects outside <producer>.<entity>.<verb>", async () => {
      await using world = await open();
      await expect(world.bus.publish("billing.invoice.paid", randomUUID(), encode(""))).rejects.toThrow();
      await expect(world.bus.publish("servers.server.*", randomUUID(), encode(""))).rejects.toThrow();
      await expect(world.bus.subscribe("bad", ["nobody.>"], async () => {})).rejects.toThrow();
    });

    it("is ready while open and not after close", async () => {
      await using world = await open();
      expect(world.bus.isReady()).toBe(true);
      await world.bus.close();
      expect(world.bus.isReady()).toBe(false);
    });
  });
}
