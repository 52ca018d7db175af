import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LoadResult } from "./load.js";

/** The repository root, from dist/test/bench/ (compiled) or test/bench/. */
export const repoRoot = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/dist\/?$/, "/");

export type Cell = string | number | undefined;

/** A plain-text table: numbers right-aligned, text left-aligned, undefined as "-". */
export function formatTable(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = rows.map((row) => headers.map((_, i) => (row[i] === undefined ? "-" : String(row[i]))));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((row) => (row[i] as string).length)));
  const alignRight = headers.map((_, i) => rows.every((row) => row[i] === undefined || typeof row[i] === "number"));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (alignRight[i] ? cell.padStart(widths[i] as number) : cell.padEnd(widths[i] as number)))
      .join("  ")
      .trimEnd();
  return [line(headers), line(widths.map((w) => "-".repeat(w))), ...text.map(line)].join("\n");
}

/** Rounds for display: at least `digits` significant digits, no exponent. */
export function round(value: number | undefined, digits = 3): number | undefined {
  if (value === undefined || !Number.isFinite(value)) return undefined;
  if (value === 0) return 0;
  const decimals = Math.max(0, digits - 1 - Math.floor(Math.log10(Math.abs(value))));
  return Number(value.toFixed(decimals));
}

/** Writes dist/bench-results/<name>-<timestamp>.json (dist/ is ignored by git); returns the path. */
export async function writeResults(name: string, results: unknown, at = new Date()): Promise<string> {
  const dir = join(repoRoot, "dist", "bench-results");
  await mkdir(dir, { recursive: true });
  const path = join(
    dir,
    `${name}-${at
      .toISOString()
      .replaceAll(":", "-")
      .replace(/\.\d+Z$/, "Z")}.json`,
  );
  await writeFile(path, `${JSON.stringify(results, null, 2)}\n`);
  return path;
}

/**
 * One row of a "where the time goes" table: CPU µs per request for each labelled process group,
 * what they add up to, the rest of the machine, and how busy the machine was.
 */
export function cpuRow(
  key: readonly Cell[],
  r: { requests: number; rps: number; cpuMs: Record<string, number>; machineBusyMs: number; elapsedS: number },
  labels: readonly string[],
  cores: number,
): Cell[] {
  const perRequestUs = (ms: number | undefined) => Math.round(((ms ?? 0) * 1000) / r.requests);
  const attributedMs = labels.reduce((sum, label) => sum + (r.cpuMs[label] ?? 0), 0);
  return [
    ...key,
    Math.round(r.rps),
    ...labels.map((label) => perRequestUs(r.cpuMs[label])),
    perRequestUs(attributedMs),
    perRequestUs(Math.max(0, r.machineBusyMs - attributedMs)),
    Math.round((100 * r.machineBusyMs) / (r.elapsedS * 1000 * cores)),
  ];
}

/** One measured load run of a target ("baseline", "gateway", ...) at a connection count. */
export type Run = { target: string; connections: number; result: LoadResult };

/**
 * The headline table of a gateway-against-baseline benchmark: both targets at each connection count,
 * and the gateway's req/s over the baseline's (the ratios the JSON line reports).
 */
export function baselineComparison(runs: readonly Run[], connectionCounts: readonly number[]) {
  const find = (target: string, connections: number) =>
    runs.find((r) => r.target === target && r.connections === connections)?.result;
  const ratios: Record<number, number | undefined> = {};
  const rows: Cell[][] = [];
  for (const connections of connectionCounts) {
    const base = find("baseline", connections);
    const gw = find("gateway", connections);
    ratios[connections] = base && gw ? gw.rps / base.rps : undefined;
    for (const [target, r] of [
      ["baseline", base],
      ["gateway", gw],
    ] as const) {
      if (!r) continue;
      rows.push([
        connections,
        target,
        Math.round(r.rps),
        round(r.latency.p50Ms),
        round(r.latency.p99Ms),
        round(r.latency.meanMs),
        r.errors,
        r.non2xx,
        target === "gateway" ? round(ratios[connections], 2) : undefined,
      ]);
    }
  }
  const table = formatTable(
    ["conns", "target", "req/s", "p50 ms", "p99 ms", "mean ms", "errors", "non-2xx", "gateway/baseline"],
    rows,
  );
  return { ratios, table };
}
