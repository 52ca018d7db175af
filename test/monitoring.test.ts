import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

// The operator's alerts and dashboard (deploy/monitoring), checked with the real tools: promtool
// parses every rule and runs the unit test of every alert (deploy/monitoring/replay-rules*.test.yml);
// the PrometheusRule the cluster gets holds the same groups; every alert has its severity,
// summary, description and a runbook that exists; every dashboard query parses, and names only
// metrics the code exports. .ci/run installs Debian's prometheus (promtool); without it, outside
// CI, the promtool checks are skipped with their reason.

const root = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);
const PROMTOOL = "/usr/bin/promtool";
const noPromtool = !existsSync(PROMTOOL);
if (noPromtool && process.env.CI) throw new Error(`CI needs ${PROMTOOL} (apt-get install prometheus)`);

type Rule = {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
};
type Groups = { groups: { name: string; rules: Rule[] }[] };

const read = (path: string) => readFileSync(join(root, path), "utf8");
const rules = parse(read("deploy/monitoring/replay-rules.yml")) as Groups;
const alerts = rules.groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
const dashboard = JSON.parse(read("deploy/monitoring/grafana-dashboard.json")) as {
  panels: { type: string; title: string; targets?: { expr: string }[] }[];
};
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Every metric family the code registers (`name: "replay_…"` in lib/ and services/) and Node's defaults used here. */
function exportedFamilies(): Set<string> {
  const sources = ["lib/metrics.ts", "services/webhooks/delivery/metrics.ts"].map(read).join("\n");
  const names = [...sources.matchAll(/name: "(replay_[a-z_]+)"/g)].map((m) => m[1] as string);
  return new Set([
    ...names,
    "process_start_time_seconds",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "nodejs_eventloop_lag_p99_seconds",
    "up",
  ]);
}

/** The metric names an expression reads (identifiers followed by a selector, a range or a space), less functions and recorded series. */
function metricsIn(expr: string): string[] {
  const words = [...expr.replace(/"[^"]*"/g, '""').matchAll(/\b([a-z_][a-z0-9_:]*)\b(?=\s*[{[)\s]|$)/g)].map(
    (m) => m[1] as string,
  );
  const functions = new Set([
    "sum",
    "max",
    "rate",
    "increase",
    "changes",
    "histogram_quantile",
    "by",
    "and",
    "or",
    "le",
    "topk",
  ]);
  return words.filter((w) => !functions.has(w) && !w.includes(":") && /^(replay_|process_|nodejs_|up$)/.test(w));
}

describe("the alert rules (deploy/monitoring/replay-rules.yml)", () => {
  it("are the PrometheusRule's groups, word for word", () => {
    const prometheusRule = parse(read("deploy/k8s/components/monitoring/prometheus-rule.yaml"));
    expect(prometheusRule.kind).toBe("PrometheusRule");
    expect(prometheusRule.spec).toEqual(rules);
    expect(read("deploy/k8s/components/monitoring/kustomization.yaml")).toContain("prometheus-rule.yaml");
  });

  it("give every alert a severity, a summary, a description and a runbook page that exists", () => {
    expect(alerts.length).toBeGreaterThanOrEqual(15);
    for (const alert of alerts) {
      expect(["critical", "warning", "info"], alert.alert).toContain(alert.labels?.severity);
      expect(alert.annotations?.summary, alert.alert).toBeTruthy();
      expect(alert.annotations?.description, alert.alert).toBeTruthy();
      expect(alert.annotations?.runbook_url, alert.alert).toBe(`docs/runbooks/${alert.alert}.md`);
      const runbook = read(`docs/runbooks/${alert.alert}.md`);
      for (const part of ["## Confirm", "## What to do", "## Escalate"]) expect(runbook, alert.alert).toContain(part);
    }
  });

  it("read only metrics the code exports", () => {
    const exported = exportedFamilies();
    const families = (name: string) => name.replace(/_(bucket|count|sum)$/, "");
    for (const rule of rules.groups.flatMap((g) => g.rules)) {
      for (const metric of metricsIn(rule.expr))
        expect(exported, `${rule.alert ?? rule.record}: ${metric}`).toContain(families(metric));
    }
  });

  it.skipIf(noPromtool)(
    `pass promtool check rules and every alert's unit test${noPromtool ? ` (skipped: no ${PROMTOOL})` : ""}`,
    async () => {
      await run(PROMTOOL, ["check", "rules", join(root, "deploy/monitoring/replay-rules.yml")]);
      const files = ["deploy/monitoring/replay-rules.test.yml", "deploy/monitoring/replay-rules-slow.test.yml"];
      type Tests = { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] };
      const tested = files.flatMap((file) => (parse(read(file)) as Tests).tests);
      const firing = new Set(
        tested.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)),
      );
      expect([...firing].sort()).toEqual(alerts.map((a) => a.alert).sort());
      const { stdout } = await run(PROMTOOL, ["test", "rules", ...files.map((file) => join(root, file))]);
      expect(stdout.match(/SUCCESS/g)).toHaveLength(2);
    },
  );
});

describe("the dashboard (deploy/monitoring/grafana-dashboard.json)", () => {
  it("has panels for requests, latency, errors, events, webhooks, pools and restarts, each reading exported metrics", () => {
    expect(queries.length).toBeGreaterThanOrEqual(20);
    const exported = exportedFamilies();
    const all = queries.map((q) => q.expr).join("\n");
    for (const family of [
      "replay_http_request_duration_seconds",
      "replay_outbox_oldest_unpublished_age_seconds",
      "replay_consumer_pending",
      "replay_webhook_attempt_duration_seconds",
      "replay_webhook_queue_depth",
      "replay_db_pool_waiting",
      "process_start_time_seconds",
    ]) {
      expect(all).toContain(family);
    }
    for (const { panel, expr } of queries) {
      for (const metric of metricsIn(expr))
        expect(exported, `${panel}: ${metric}`).toContain(metric.replace(/_(bucket|count|sum)$/, ""));
    }
  });

  it.skipIf(noPromtool)("has queries that all parse (promtool, as recording rules)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "replay-dashboard-"));
    try {
      const file = join(dir, "queries.yml");
      const asRules = queries.map((q, i) => ({
        record: `dashboard:query_${i}`,
        expr: q.expr.replaceAll("$__rate_interval", "5m"),
      }));
      writeFileSync(file, JSON.stringify({ groups: [{ name: "dashboard", rules: asRules }] }));
      await run(PROMTOOL, ["check", "rules", file]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
