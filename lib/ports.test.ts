import { describe, expect, it } from "vitest";
import { loadConfig } from "./config.js";
import { plannedListeners } from "./ports.js";

describe("plannedListeners", () => {
  it("checks the embedded services' fixed ports with the gateway's, naming each one's variable; 0 is left to the OS", () => {
    const listeners = plannedListeners(loadConfig({ MARKERS_PORT: "0" }), undefined);
    expect(listeners.map((l) => [l.portVariable, l.port, l.host])).toEqual([
      ["PORT", 8080, "127.0.0.1"],
      ["INTERNAL_PORT", 8081, "127.0.0.1"],
      ["SERVERS_PORT", 9092, "127.0.0.1"],
      ["REPLAYS_PORT", 9093, "127.0.0.1"],
      ["WEBHOOKS_PORT", 9094, "127.0.0.1"],
    ]);
  });

  it("leaves the embedded services' ports out of a gateway or service process on its own", () => {
    const env = { DATABASE_URL: "postgres://db/x", NATS_URL: "nats://n:4222" };
    expect(
      plannedListeners(loadConfig({ ...env, SECRETS_KEY: "k".repeat(44) }, "gateway"), "gateway").map(
        (l) => l.portVariable,
      ),
    ).toEqual(["PORT", "INTERNAL_PORT"]);
    expect(plannedListeners(loadConfig(env, "servers"), "servers").map((l) => [l.portVariable, l.port])).toEqual([
      ["PORT", 9092],
    ]);
  });
});
