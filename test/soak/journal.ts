import { createWriteStream } from "node:fs";

/**
 * Every request the load sent and what came back, in memory for the checker and as JSON lines on
 * disk for a post-mortem. `outcome` is what a client may conclude: `ok` (acknowledged), `rejected`
 * (a definite refusal: nothing changed), `unknown` (no answer, 503, UNAVAILABLE, a deadline: it
 * may or may not have taken effect).
 */
export type Outcome = "ok" | "rejected" | "unknown";

export type Entry = {
  seq: number;
  op: string;
  /** HTTP or gRPC. */
  via: "http" | "grpc";
  tenantId: string;
  /** The replay, server or marker the request was about. */
  target: string | undefined;
  startMs: number;
  endMs: number;
  /** HTTP status, or the gRPC status name (OK, UNAVAILABLE, ...); "network" when no answer came. */
  status: number | string;
  /** The contract code of a refusal, or the error message of a failure without one. */
  code: string | undefined;
  outcome: Outcome;
  idempotencyKey?: string;
};

export type Journal = {
  record(entry: Omit<Entry, "seq">): Entry;
  entries(): readonly Entry[];
  close(): Promise<void>;
};

export function createJournal(file: string): Journal {
  const all: Entry[] = [];
  const out = createWriteStream(file);
  return {
    record(entry) {
      const full = { seq: all.length, ...entry };
      all.push(full);
      out.write(`${JSON.stringify(full)}\n`);
      return full;
    },
    entries: () => all,
    close: () => new Promise((resolve) => out.end(resolve)),
  };
}

const grpcNames = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/** The gRPC status name of a code (grpc-js and Connect number them alike). */
export function grpcStatusName(code: number): string {
  return grpcNames[code] ?? `CODE_${code}`;
}

/** What a client may conclude from an HTTP status (0: no answer). */
export function httpOutcome(status: number): Outcome {
  if (status >= 200 && status < 300) return "ok";
  if (status === 0 || status >= 500) return "unknown";
  return "rejected";
}

/** What a client may conclude from a gRPC status. */
export function grpcOutcome(name: string): Outcome {
  if (name === "OK") return "ok";
  return ["UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "INTERNAL", "UNKNOWN", "ABORTED"].includes(name)
    ? "unknown"
    : "rejected";
}
