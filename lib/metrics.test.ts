import { afterEach, describe, expect, it, vi } from "vitest";
import { metricValue } from "./_testing.js";
import { metricsText, SCRAPE_READ_DEADLINE_MS, scrapedGauge, watchConsumer, watchPool } from "./metrics.js";

const stuck = scrapedGauge({ name: "test_stuck_reading", help: "A read that never ends.", labelNames: ["which"] });

describe("a scrape with a read that never ends (an exhausted pool, a NATS outage)", () => {
  afterEach(() => vi.useRealTimers());

  it("answers at the read deadline with every other series, and the next scrape joins the stuck read", async () => {
    vi.useFakeTimers();
    let reads = 0;
    const never = () => () => {
      reads++;
      return new Promise<never>(() => {});
    };
    const unwatch = [
      stuck.watch(async () => [[{ which: "fine" }, 1]]),
      stuck.watch(never()),
      watchConsumer("stuck_consumer", never()),
      watchPool("exhausted", () => ({ total: 4, idle: 0, waiting: 7 })),
      // A reader that throws before returning a promise fails its own read only.
      watchConsumer("broken_consumer", () => {
        throw new TypeError("not a function");
      }),
    ];
    try {
      for (const scrape of [1, 2]) {
        const text = metricsText();
        await vi.advanceTimersByTimeAsync(SCRAPE_READ_DEADLINE_MS);
        const { body } = await text;
        expect(metricValue(body, "replay_db_pool_waiting", { schema: "exhausted" }), `scrape ${scrape}`).toBe(7);
        expect(metricValue(body, "test_stuck_reading", { which: "fine" })).toBe(1);
        expect(metricValue(body, "replay_consumer_pending", { durable: "stuck_consumer" })).toBeUndefined();
      }
      // One read each for both scrapes: the second joined the first's instead of piling up.
      expect(reads).toBe(2);
    } finally {
      for (const stop of unwatch) stop();
    }
  });
});
