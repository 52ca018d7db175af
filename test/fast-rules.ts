import { parse } from "yaml";

// deploy/monitoring/replay-rules.yml with time scaled down, so that a live test sees in seconds
// what the real rules see in minutes: every `for:` and every range selector divided by one factor
// (5m at 60 is 5s), and the thresholds that are time or that a test could not reach in seconds
// replaced by the table below. Everything else stays word for word, the names included.

export type Rule = {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
};
export type RuleGroups = { groups: { name: string; rules: Rule[] }[] };

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400, w: 604_800, y: 31_536_000 };

/** A Prometheus duration ("5m", "1h30m", "500ms") in seconds. */
export function durationSeconds(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|[smhdwy])/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) throw new Error(`not a duration: ${text}`);
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * (UNIT_SECONDS[unit as string] as number), 0);
}

/** Seconds as a Prometheus duration, to the millisecond. */
function duration(seconds: number): string {
  const ms = Math.round(seconds * 1000);
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/**
 * The rules file `text` with time divided by `factor`. A range selector never shrinks below
 * `minWindowS` (rate() needs a few samples in its window); a `for:` has no floor.
 */
export function fastRules(text: string, factor: number, minWindowS: number): RuleGroups {
  // Thresholds in the expressions, by alert: [as written, in the fast copy]. A test must reach each
  // within seconds, and every one is checked to be there, so a changed rule fails loudly here.
  const thresholds: Record<string, [number, number]> = {
    // Seconds of age: time, scaled like every duration.
    ReplayOutboxLag: [60, 60 / factor],
    ReplayWebhookBacklog: [300, 300 / factor],
    ReplayRetentionBehind: [7200, 7200 / factor],
    // Events waiting, not time: a thousand would take a test minutes to publish, twenty seconds.
    ReplayConsumerLag: [1000, 20],
  };
  const rules = parse(text) as RuleGroups;
  for (const rule of rules.groups.flatMap((g) => g.rules)) {
    rule.expr = rule.expr.replace(
      /\[(\w+)\]/g,
      (_, range: string) => `[${duration(Math.max(durationSeconds(range) / factor, minWindowS))}]`,
    );
    if (rule.for !== undefined) rule.for = duration(durationSeconds(rule.for) / factor);
    const threshold = rule.alert === undefined ? undefined : thresholds[rule.alert];
    if (threshold === undefined) continue;
    const [from, to] = threshold;
    const written = `> ${from}`;
    if (rule.expr.split(written).length !== 2) throw new Error(`${rule.alert}: no one "${written}" in ${rule.expr}`);
    rule.expr = rule.expr.replace(written, `> ${to}`);
  }
  return rules;
}
