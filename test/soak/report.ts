import type { Invariant } from "./invariant.js";

/**
 * Prints the run's report on stdout: the faults as they happened, each invariant as a number
 * (violations of how many checked, with examples), the latency away from faults, and last, on
 * one line, the summary as JSON for scripts.
 */
export function printReport(report: {
  invariants: Invariant[];
  faultLog: string[];
  latency: { calmRequests: number; p50Ms: number; p99Ms: number };
  summary: Record<string, unknown>;
}): void {
  const out: string[] = [
    "faults:",
    ...report.faultLog.map((line) => `  ${line}`),
    "invariants (violations / checked):",
  ];
  for (const inv of report.invariants) {
    out.push(`  ${inv.violations > 0 ? "FAIL" : "ok  "} ${inv.violations} / ${inv.checked}  ${inv.name}`);
    for (const example of inv.examples) out.push(`         e.g. ${example}`);
  }
  out.push(
    `latency outside kill windows: p50 ${report.latency.p50Ms} ms, p99 ${report.latency.p99Ms} ms over ${report.latency.calmRequests} requests`,
  );
  out.push(JSON.stringify(report.summary));
  process.stdout.write(`${out.join("\n")}\n`);
}
