import { describe, expect, it } from "vitest";
import type { LoadResult } from "./load.js";
import { mergeRounds, roundOrder } from "./rounds.js";

const round = (over: Partial<LoadResult> & { requests: number; elapsedS: number }): LoadResult => ({
  connections: 64,
  rps: over.requests / over.elapsedS,
  latency: { count: over.requests, meanMs: 10, p50Ms: 8, p99Ms: 30, maxMs: 40 },
  errors: 0,
  non2xx: 0,
  statusCounts: { "201": over.requests },
  bytesPerResponse: 300,
  cpuMs: { gateway: 100 },
  machineBusyMs: 400,
  ...over,
});

describe("roundOrder", () => {
  it("alternates which side goes first, so each side runs as often early as late", () => {
    expect(roundOrder(4).flat()).toEqual([0, 1, 1, 0, 0, 1, 1, 0]);
  });
});

describe("mergeRounds", () => {
  it("sums counts and CPU, and takes req/s over the rounds' whole time", () => {
    const merged = mergeRounds([
      round({ requests: 3000, elapsedS: 2.5 }),
      round({
        requests: 1000,
        elapsedS: 2.5,
        latency: { count: 1000, meanMs: 30, p50Ms: 28, p99Ms: 90, maxMs: 120 },
        errors: 2,
        non2xx: 1,
        statusCounts: { "201": 999, "500": 1 },
        cpuMs: { gateway: 300, markers: 50 },
        machineBusyMs: 900,
      }),
      round({ requests: 2000, elapsedS: 2.5, latency: { count: 2000, meanMs: 15, p50Ms: 12, p99Ms: 50, maxMs: 60 } }),
    ]);
    expect(merged.requests).toBe(6000);
    expect(merged.elapsedS).toBe(7.5);
    expect(merged.rps).toBe(800);
    expect(merged.latency).toEqual({
      count: 6000,
      meanMs: (3000 * 10 + 1000 * 30 + 2000 * 15) / 6000,
      p50Ms: 12,
      p99Ms: 50,
      maxMs: 120,
    });
    expect(merged.errors).toBe(2);
    expect(merged.non2xx).toBe(1);
    expect(merged.statusCounts).toEqual({ "201": 5999, "500": 1 });
    expect(merged.cpuMs).toEqual({ gateway: 500, markers: 50 });
    expect(merged.machineBusyMs).toBe(1700);
    expect(merged.rounds).toBe(3);
  });

  it("returns a single round as it is, and refuses none", () => {
    const only = round({ requests: 10, elapsedS: 1 });
    expect(mergeRounds([only])).toBe(only);
    expect(() => mergeRounds([])).toThrow(/no rounds/);
  });
});
