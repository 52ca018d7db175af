import type { Outcome } from "./journal.js";

/**
 * What the load was told: the entities it created and, per operation, whether it was acknowledged
 * (`ok`) or may have happened (`unknown`). The checker holds the system to the acknowledged parts
 * and tolerates the unknown ones either way.
 */
export type Op =
  | "start"
  | "finish"
  | "upload"
  | "uploadCancelled"
  | "processing"
  | "ready"
  | "failed"
  | "release"
  | "revoke"
  | "delete";

export type ReplayModel = {
  replayId: string;
  tenantId: string;
  serverId: string;
  ops: Partial<Record<Op, Outcome>>;
  /** The size an acknowledged finish or upload set. */
  sizeBytes?: number;
};

export type MarkerModel = { markerId: string; replayId: string; tenantId: string; idempotencyKey?: string };

export type SubscriptionModel = { tenantId: string; id: string; path: string; events: string[] };

export type Model = {
  subscriptions: SubscriptionModel[];
  servers: Map<string, { tenantId: string; checkedIn: Outcome }>;
  replays: Map<string, ReplayModel>;
  markers: MarkerModel[];
  /** Acknowledged creates per (tenant, Idempotency-Key): every answer must name the same marker. */
  keyedAnswers: Map<string, Set<string>>;
  note(replay: ReplayModel, op: Op, outcome: Outcome): void;
};

/** Acknowledged beats unknown beats refused: a retry refused after an unknown try leaves it unknown. */
function merge(a: Outcome | undefined, b: Outcome): Outcome {
  if (a === "ok" || b === "ok") return "ok";
  if (a === "unknown" || b === "unknown") return "unknown";
  return "rejected";
}

export function createModel(): Model {
  return {
    subscriptions: [],
    servers: new Map(),
    replays: new Map(),
    markers: [],
    keyedAnswers: new Map(),
    note(replay, op, outcome) {
      replay.ops[op] = merge(replay.ops[op], outcome);
    },
  };
}

/** Whether an operation was acknowledged, or may have happened. */
export const acked = (r: ReplayModel, op: Op) => r.ops[op] === "ok";
export const maybe = (r: ReplayModel, op: Op) => r.ops[op] === "ok" || r.ops[op] === "unknown";
