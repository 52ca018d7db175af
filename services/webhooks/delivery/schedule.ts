/** How much longer than scheduled a wait may randomly be (never shorter): spreads a burst of retries. */
export const RETRY_JITTER_MAX = 0.2;

export type AttemptOutcome = {
  /** Null when no HTTP answer came (connection error, timeout, blocked address). */
  statusCode: number | null;
  /** Null on success (a 2xx); otherwise why the attempt failed. */
  error: string | null;
  retryAfterMs: number | null;
};

export type NextStep =
  | { status: "succeeded"; nextAttemptAt: null }
  | { status: "failed"; nextAttemptAt: null }
  | { status: "pending"; nextAttemptAt: Date };

export type NextStepInput = {
  outcome: AttemptOutcome;
  /** Automatic attempts made so far, this one included (manual replays do not count). */
  automaticAttempts: number;
  /** When this attempt ended; the next wait counts from the failure. */
  failedAt: Date;
  /** WEBHOOK_RETRY_SCHEDULE: the wait before each automatic attempt, the first counted from the event. */
  retryScheduleMs: readonly number[];
  /** A number in [0, 1); injectable so that tests pin the jitter. */
  random?: () => number;
};

/** What follows an automatic attempt (decisions.md §6); a Retry-After is capped at twice the scheduled wait. */
export function nextStep(input: NextStepInput): NextStep {
  const { outcome, automaticAttempts, retryScheduleMs } = input;
  if (outcome.error === null) return { status: "succeeded", nextAttemptAt: null };
  if (outcome.statusCode === 410) return { status: "failed", nextAttemptAt: null };
  const scheduledMs = retryScheduleMs[automaticAttempts];
  if (scheduledMs === undefined) return { status: "failed", nextAttemptAt: null };
  let waitMs = jittered(scheduledMs, input.random ?? Math.random);
  if ((outcome.statusCode === 429 || outcome.statusCode === 503) && outcome.retryAfterMs !== null) {
    waitMs = Math.max(waitMs, Math.min(outcome.retryAfterMs, 2 * scheduledMs));
  }
  return { status: "pending", nextAttemptAt: new Date(input.failedAt.getTime() + waitMs) };
}

/** When a new delivery's first automatic attempt is due: the schedule's first wait after the event. */
export function firstAttemptAt(
  eventAt: Date,
  retryScheduleMs: readonly number[],
  random: () => number = Math.random,
): Date {
  return new Date(eventAt.getTime() + jittered(retryScheduleMs[0] ?? 0, random));
}

function jittered(waitMs: number, random: () => number): number {
  return Math.round(waitMs * (1 + RETRY_JITTER_MAX * random()));
}
