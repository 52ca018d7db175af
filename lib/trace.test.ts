import { describe, expect, it } from "vitest";
import {
  currentTrace,
  exportSpans,
  formatTraceparent,
  nextSpan,
  parseTraceparent,
  runInTrace,
  startSpan,
} from "./trace.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";

describe("W3C traceparent", () => {
  it("reads version 00 exactly, and a later version's first four fields", () => {
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, spanId: SPAN, sampled: true });
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-00`)?.sampled).toBe(false);
    expect(parseTraceparent(`01-${TRACE}-${SPAN}-01-what-comes-later`)?.traceId).toBe(TRACE);
  });

  it.each([
    ["absent", undefined],
    ["repeated", [`00-${TRACE}-${SPAN}-01`, `00-${TRACE}-${SPAN}-01`]],
    ["version ff", `ff-${TRACE}-${SPAN}-01`],
    ["version 00 with more fields", `00-${TRACE}-${SPAN}-01-extra`],
    ["an all-zero trace id", `00-${"0".repeat(32)}-${SPAN}-01`],
    ["an all-zero parent id", `00-${TRACE}-${"0".repeat(16)}-01`],
    ["upper case", `00-${TRACE.toUpperCase()}-${SPAN}-01`],
    ["a short trace id", `00-${TRACE.slice(1)}-${SPAN}-01`],
    ["garbage", "hello"],
  ])("ignores %s (a new trace starts instead)", (_what, header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });

  it("continues a trace with a new span, or starts one; formats it back", () => {
    const parent = parseTraceparent(`00-${TRACE}-${SPAN}-01`);
    const child = nextSpan(parent, "req-1");
    expect(child).toMatchObject({ traceId: TRACE, sampled: true, requestId: "req-1" });
    expect(child.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(child.spanId).not.toBe(SPAN);
    expect(formatTraceparent(child)).toBe(`00-${TRACE}-${child.spanId}-01`);
    const fresh = nextSpan(undefined);
    expect(fresh.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(parseTraceparent(formatTraceparent(fresh))).toEqual({
      traceId: fresh.traceId,
      spanId: fresh.spanId,
      sampled: true,
    });
  });

  it("keeps the current hop across awaits and timers within runInTrace, and none outside", async () => {
    const hop = nextSpan(undefined);
    expect(currentTrace()).toBeUndefined();
    await runInTrace(hop, async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(currentTrace()).toBe(hop);
    });
    expect(currentTrace()).toBeUndefined();
  });

  it("keeps concurrent hops apart, and works again after every hop ended and the storage was turned off", async () => {
    const [a, b] = [nextSpan(undefined), nextSpan(undefined)];
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = runInTrace(a, async () => {
      await gate;
      return currentTrace();
    });
    // b ends while a still runs: a keeps its context.
    expect(await runInTrace(b, async () => currentTrace())).toBe(b);
    release();
    expect(await first).toBe(a);
    expect(currentTrace()).toBeUndefined();
    await expect(runInTrace(a, async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(() =>
      runInTrace(a, () => {
        throw new Error("sync");
      }),
    ).toThrow("sync");
    expect(await runInTrace(b, async () => currentTrace())).toBe(b);
    expect(runInTrace(a, () => currentTrace())).toBe(a);
  });

  it("makes a span the next hop, ending as a no-op, when no exporter is set; the exporter's ids when one is", () => {
    const parent = nextSpan(undefined);
    const quiet = startSpan("GET /x", "server", parent, { requestId: "r1" });
    expect(quiet.trace).toMatchObject({ traceId: parent.traceId, sampled: true, requestId: "r1" });
    expect(quiet.trace.spanId).not.toBe(parent.spanId);
    quiet.end({ status: 200 });

    const ended: unknown[] = [];
    exportSpans((name, kind, from, attributes) => ({
      traceId: from?.traceId ?? "f".repeat(32),
      spanId: "1".repeat(16),
      sampled: false,
      end: (endAttributes, failure) => ended.push({ name, kind, attributes, endAttributes, failure }),
    }));
    try {
      const span = startSpan("GET /y", "client", parent, { attributes: { a: 1 } });
      expect(span.trace).toEqual({ traceId: parent.traceId, spanId: "1".repeat(16), sampled: false });
      span.end({ b: 2 }, "boom");
      expect(ended).toEqual([
        { name: "GET /y", kind: "client", attributes: { a: 1 }, endAttributes: { b: 2 }, failure: "boom" },
      ]);
    } finally {
      exportSpans(undefined);
    }
  });
});
