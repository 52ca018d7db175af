import { describe, expect, it } from "vitest";
import { exportSpans, formatTraceparent, nextSpan, parseTraceparent, startSpan, traceLogFields } from "./trace.js";

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

  it("gives a hop's log fields: its trace id, and the request id it serves when it serves one", () => {
    const hop = nextSpan(undefined);
    expect(traceLogFields(undefined)).toEqual({});
    expect(traceLogFields(hop)).toEqual({ trace_id: hop.traceId });
    expect(traceLogFields(nextSpan(hop, "r1"))).toEqual({ trace_id: hop.traceId, requestId: "r1" });
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
