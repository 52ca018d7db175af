import { describe, expect, it } from "vitest";
import { newBreaker, noteAttempt, probeHeld, type Resumed } from "./breaker.js";

/** A probe whose answers the test gives, one call at a time. */
function scriptedProbe() {
  const calls: { url: string; answer: (up: boolean) => void }[] = [];
  const probe = (url: string) => new Promise<boolean>((answer) => calls.push({ url, answer }));
  return { calls, probe };
}

/** The releases `probeHeld` reports, and a promise for the next one. */
function releases() {
  const seen: [string, Resumed][] = [];
  let next: (() => void) | undefined;
  const resumed = (id: string, why: Resumed) => {
    seen.push([id, why]);
    next?.();
  };
  const nextRelease = () => new Promise<void>((resolve) => (next = resolve));
  return { seen, resumed, nextRelease };
}

describe("the delivery worker's circuit breaker", () => {
  it("holds a subscription on its first unreachable attempt, once", () => {
    const b = newBreaker(60_000);
    expect(noteAttempt(b, "s1", "https://a.example/hook", true, 1_000)).toBe(true);
    expect(noteAttempt(b, "s1", "https://a.example/hook", true, 2_000)).toBe(false);
    expect(noteAttempt(b, "s2", "https://b.example/hook", false, 2_000)).toBe(false);
    expect([...b.held.keys()]).toEqual(["s1"]);
    expect(b.held.get("s1")?.since).toBe(1_000);
  });

  it("probes a held receiver once at a time and releases it when the probe connects", async () => {
    const b = newBreaker(60_000);
    noteAttempt(b, "s1", "https://a.example/hook", true, 0);
    const { calls, probe } = scriptedProbe();
    const { seen, resumed, nextRelease } = releases();
    probeHeld(b, 1_000, probe, resumed);
    probeHeld(b, 2_000, probe, resumed);
    expect(calls.map((c) => c.url)).toEqual(["https://a.example/hook"]);

    calls[0]?.answer(false);
    await Promise.resolve();
    expect(b.held.has("s1")).toBe(true);
    probeHeld(b, 3_000, probe, resumed);
    expect(calls).toHaveLength(2);

    const released = nextRelease();
    calls[1]?.answer(true);
    await released;
    expect(seen).toEqual([["s1", "reachable"]]);
    expect(b.held.size).toBe(0);
  });

  it("releases a receiver still unreachable after the hold's bound to the schedule, and holds it no more until it answers", () => {
    const b = newBreaker(60_000);
    noteAttempt(b, "s1", "https://a.example/hook", true, 0);
    const { calls, probe } = scriptedProbe();
    const { seen, resumed } = releases();
    probeHeld(b, 60_001, probe, resumed);
    expect(seen).toEqual([["s1", "hold-over"]]);
    expect(calls).toHaveLength(0);
    expect(b.held.size).toBe(0);

    expect(noteAttempt(b, "s1", "https://a.example/hook", true, 70_000)).toBe(false);
    expect(b.held.size).toBe(0);
    // It answered once: the next outage holds it again.
    noteAttempt(b, "s1", "https://a.example/hook", false, 80_000);
    expect(noteAttempt(b, "s1", "https://a.example/hook", true, 90_000)).toBe(true);
  });
});
