import { DomainError } from "../../lib/errors.js";

// The replay lifecycle of decisions.md §7, as pure rules.

export type ReplayStatus = "recording" | "processing" | "ready" | "failed" | "expired";
export type Pipeline = "none" | "started" | "ended";
export type Visibility = "staff" | "public";

export type ReplayState = {
  status: ReplayStatus;
  pipeline: Pipeline;
  visibility: Visibility;
  revoked: boolean;
};

export type AssetStep = "processing" | "ready" | "failed";

export type Action =
  | { kind: "finish"; startedAt: Date; endedAt: Date }
  | { kind: "asset"; step: AssetStep }
  | { kind: "release" }
  | { kind: "revoke" }
  | { kind: "expire" };

export type Change = Partial<ReplayState>;

const refuse = (detail: string) => new DomainError("INVALID_TRANSITION", detail);

export function isFinished(state: ReplayState): boolean {
  return state.status !== "recording";
}

/**
 * Where the table is silent: an expired replay's pipeline can no longer move (that would bring its status
 * back), and a public collection is not released again, so each transition emits its event once.
 */
export function nextState(state: ReplayState, action: Action): Change {
  switch (action.kind) {
    case "finish":
      if (state.status !== "recording") throw refuse(`the replay is ${state.status}, not recording`);
      if (action.endedAt.getTime() < action.startedAt.getTime()) throw refuse("ended_at is before started_at");
      return { status: "processing" };
    case "asset":
      if (!isFinished(state)) throw refuse("the replay is still recording");
      if (state.status === "expired") throw refuse("the replay has expired");
      if (action.step === "processing") {
        if (state.pipeline !== "none") throw refuse("the asset pipeline has already started");
        return { pipeline: "started", status: "processing" };
      }
      if (state.pipeline !== "started") {
        throw refuse(state.pipeline === "none" ? "the asset pipeline has not started" : "the asset pipeline has ended");
      }
      return { pipeline: "ended", status: action.step };
    case "release":
      if (state.status !== "ready") throw refuse(`the replay is ${state.status}, not ready`);
      if (state.revoked) throw refuse("the collection was revoked");
      if (state.visibility === "public") throw refuse("the collection is already released");
      return { visibility: "public" };
    case "revoke":
      if (!isFinished(state)) throw refuse("the replay is still recording");
      if (state.revoked) throw refuse("the collection was already revoked");
      return { visibility: "staff", revoked: true };
    case "expire":
      if (!isFinished(state)) throw refuse("the replay is still recording");
      if (state.status === "expired") throw refuse("the replay has already expired");
      return { status: "expired" };
    default: {
      const never: never = action;
      throw new Error(`unknown action ${JSON.stringify(never)}`);
    }
  }
}
