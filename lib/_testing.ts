// For tests: reading values out of a Prometheus text exposition.

/**
 * The sum of the samples of `name` whose labels include every one of `labels` (0 when none match),
 * or undefined when no sample of `name` is there at all.
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let found = false;
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    found = true;
    const have = new Map(
      [...(match[2] ?? "").matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([key, value]) => have.get(key) === value)) sum += Number(match[3]);
  }
  return found ? sum : undefined;
}
