/**
 * A Retry-After header (RFC 9110 §10.2.3) as milliseconds from `nowMs`: delay-seconds or an
 * HTTP-date; a date in the past is 0. Undefined when absent or unreadable, so that a receiver's
 * malformed header falls back to the schedule instead of failing the attempt's bookkeeping.
 */
export function parseRetryAfterMs(value: string | string[] | undefined, nowMs: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (text === undefined || text === "") return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Date.parse also reads forms that are not HTTP-dates (ISO 8601, for one); require the weekday-comma shape.
  if (!/^[A-Za-z]{3}, /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}
