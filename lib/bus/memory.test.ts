import { randomUUID } from "node:crypto";
import { describe, expect, it, onTestFinished } from "vitest";
import { createMemoryTestBus, describeBusContract, waitFor } from "./_testing.js";
import { createMemoryBus } from "./memory.js";

describe("memory bus", () => {
  describeBusContract(async () => createMemoryTestBus());

  it("runs one handler of a durable at a time, across its subjects", async () => {
    const bus = createMemoryBus();
    onTestFinished(() => bus.close());
    let running = 0;
    let most = 0;
    let handled = 0;
    onTestFinished(
      await bus.subscribe("serial", ["replays.recording.started", "replays.replay.deleted"], async () => {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setImmediate(resolve));
        running--;
        handled++;
      }),
    );
    for (let i = 0; i < 20; i++) {
      await bus.publish(i % 2 ? "replays.recording.started" : "replays.replay.deleted", randomUUID(), new Uint8Array());
    }
    await waitFor("all events", () => handled === 20);
    expect(most).toBe(1);
  });

  it("holds later events of a durable back while an earlier one keeps failing", async () => {
    const bus = createMemoryBus();
    onTestFinished(() => bus.close());
    const failing = randomUUID();
    const later = randomUUID();
    const order: string[] = [];
    let failures = 0;
    onTestFinished(
      await bus.subscribe("blocked", ["servers.server.created"], async (msg) => {
        if (msg.eventId === failing && failures < 2) {
          failures++;
          throw new Error("not yet");
        }
        order.push(msg.eventId);
      }),
    );
    await bus.publish("servers.server.created", failing, new Uint8Array());
    await bus.publish("servers.server.created", later, new Uint8Array());
    await waitFor("both events", () => order.length === 2);
    expect(order).toEqual([failing, later]);
    expect(failures).toBe(2);
  });

  it("refuses a durable name reused for other subjects", async () => {
    const bus = createMemoryBus();
    onTestFinished(() => bus.close());
    onTestFinished(await bus.subscribe("named", ["servers.server.created"], async () => {}));
    await expect(bus.subscribe("named", ["servers.server.purged"], async () => {})).rejects.toThrow(
      /already subscribes/,
    );
  });

  it("refuses to publish after close", async () => {
    const bus = createMemoryBus();
    await bus.close();
    await expect(bus.publish("servers.server.created", randomUUID(), new Uint8Array())).rejects.toThrow(/closed/);
  });
});
