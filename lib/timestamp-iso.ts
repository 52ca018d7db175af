import { type Timestamp, timestampDate, timestampMs } from "@bufbuild/protobuf/wkt";

const DAY_MS = 86_400_000;
/** 0000-01-01T00:00:00Z and 10000-01-01T00:00:00Z: toISOString writes four-digit years between. */
const FIRST_MS = -62_167_219_200_000;
const END_MS = 253_402_300_800_000;
const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, "0"));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, "0"));

/**
 * `timestampDate(ts).toISOString()` without the Date (docs/performance.md), the same text for every
 * timestamp; outside years 0-9999, timestampDate's own answer or error.
 */
export function timestampIso(ts: Timestamp): string {
  const ms = timestampMs(ts);
  if (!(ms >= FIRST_MS && ms < END_MS)) return timestampDate(ts).toISOString();
  const days = Math.floor(ms / DAY_MS);
  let rest = ms - days * DAY_MS;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  return `${civilDate(days)}T${TWO_DIGITS[hours]}:${TWO_DIGITS[minutes]}:${TWO_DIGITS[seconds]}.${THREE_DIGITS[rest - seconds * 1000]}Z`;
}

/** H. Hinnant's civil_from_days: 400-year eras starting on March 1st. */
function civilDate(days: number): string {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shiftedMonth = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * shiftedMonth + 2) / 5) + 1;
  const month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  return `${year < 1000 ? String(year).padStart(4, "0") : year}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]}`;
}
