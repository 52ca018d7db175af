import { describe, expect, it } from "vitest";
import { DomainError } from "../../lib/errors.js";
import { type Action, nextState, type ReplayState } from "./transitions.js";

const base: ReplayState = { status: "recording", pipeline: "none", visibility: "staff", revoked: false };
const at = (s: Partial<ReplayState>): ReplayState => ({ ...base, ...s });
const t0 = new Date("2026-01-01T00:00:00Z");
const t1 = new Date("2026-01-01T00:10:00Z");
const finish: Action = { kind: "finish", startedAt: t0, endedAt: t1 };

const recording = at({});
const finished = at({ status: "processing" });
const processing = at({ status: "processing", pipeline: "started" });
const ready = at({ status: "ready", pipeline: "ended" });
const failed = at({ status: "failed", pipeline: "ended" });
const expired = at({ status: "expired" });
const released = at({ status: "ready", pipeline: "ended", visibility: "public" });
const revoked = at({ status: "ready", pipeline: "ended", revoked: true });

describe("replay lifecycle rules (decisions.md §7)", () => {
  it.each<[string, ReplayState, Action, Partial<ReplayState>]>([
    ["finish a recording", recording, finish, { status: "processing" }],
    [
      "finish at the start instant",
      recording,
      { kind: "finish", startedAt: t0, endedAt: t0 },
      { status: "processing" },
    ],
    [
      "start the pipeline",
      finished,
      { kind: "asset", step: "processing" },
      { pipeline: "started", status: "processing" },
    ],
    ["end it ready", processing, { kind: "asset", step: "ready" }, { pipeline: "ended", status: "ready" }],
    ["end it failed", processing, { kind: "asset", step: "failed" }, { pipeline: "ended", status: "failed" }],
    ["release a ready replay", ready, { kind: "release" }, { visibility: "public" }],
    ["revoke a finished replay", finished, { kind: "revoke" }, { visibility: "staff", revoked: true }],
    ["revoke a released one", released, { kind: "revoke" }, { visibility: "staff", revoked: true }],
    ["revoke an expired one", expired, { kind: "revoke" }, { visibility: "staff", revoked: true }],
    ["expire a finished replay", finished, { kind: "expire" }, { status: "expired" }],
    ["expire a failed one", failed, { kind: "expire" }, { status: "expired" }],
    ["expire a revoked one", revoked, { kind: "expire" }, { status: "expired" }],
  ])("allows: %s", (_name, state, action, change) => {
    expect(nextState(state, action)).toEqual(change);
  });

  it.each<[string, ReplayState, Action]>([
    ["finish twice", finished, finish],
    ["finish ending before it started", recording, { kind: "finish", startedAt: t1, endedAt: t0 }],
    ["pipeline on a recording", recording, { kind: "asset", step: "processing" }],
    ["pipeline started twice", processing, { kind: "asset", step: "processing" }],
    ["pipeline restarted after it ended", ready, { kind: "asset", step: "processing" }],
    ["ready before the pipeline started", finished, { kind: "asset", step: "ready" }],
    ["failed before the pipeline started", finished, { kind: "asset", step: "failed" }],
    ["ready after it ended", failed, { kind: "asset", step: "ready" }],
    ["pipeline on an expired replay", expired, { kind: "asset", step: "processing" }],
    ["ready on an expired replay", at({ status: "expired", pipeline: "started" }), { kind: "asset", step: "ready" }],
    ["release a recording", recording, { kind: "release" }],
    ["release before ready", processing, { kind: "release" }],
    ["release a failed replay", failed, { kind: "release" }],
    ["release a revoked collection", revoked, { kind: "release" }],
    ["release twice", released, { kind: "release" }],
    ["revoke a recording", recording, { kind: "revoke" }],
    ["revoke twice", revoked, { kind: "revoke" }],
    ["expire a recording", recording, { kind: "expire" }],
    ["expire twice", expired, { kind: "expire" }],
  ])("refuses with INVALID_TRANSITION: %s", (_name, state, action) => {
    let caught: unknown;
    try {
      nextState(state, action);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DomainError);
    expect((caught as DomainError).code).toBe("INVALID_TRANSITION");
  });
});
