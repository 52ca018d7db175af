/** Retry-After (RFC 9110 §10.2.3) in ms from `nowMs`; undefined when unreadable, so the schedule applies instead. */
export function parseRetryAfterMs(value: string | string[] | undefined, nowMs: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === "") return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Date.parse also reads forms that are not HTTP-dates (ISO 8601, for one); require the weekday-comma shape.
  if (!/^[A-Za-z]{3}, /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
