/**
 * Fast for the UTC shape Postgres sends (`2026-11-26 05:48:10.110123+00`), where pg's parser is costly
 * (docs/performance.md); any other text goes to `fallback`, pg's parser, which agrees on the fast shape.
 */
export function createTimestamptzParser(fallback: (text: string) => unknown): (text: string) => unknown {
  return (text) => {
    const length = text.length;
    // 22 characters without a fraction, up to 29 with six digits of it.
    if (length < 22 || length > 29 || !isUtcShape(text, length)) return fallback(text);
    const fraction = length > 22 ? 1000 * Number.parseFloat(text.slice(19, length - 3)) : 0;
    return new Date(
      Date.UTC(
        digits(text, 0, 4),
        digits(text, 5, 2) - 1,
        digits(text, 8, 2),
        digits(text, 11, 2),
        digits(text, 14, 2),
        digits(text, 17, 2),
        fraction,
      ),
    );
  };
}

const DIGIT_POSITIONS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];

/** `YYYY-MM-DD HH:MM:SS[.f{1,6}]+00` with a year from 1000 (before it, Date.UTC reads 0-99 as 19xx). */
function isUtcShape(text: string, length: number): boolean {
  if (text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32) return false;
  if (text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58 || text.charCodeAt(0) === 48) return false;
  for (const at of DIGIT_POSITIONS) if (!isDigit(text.charCodeAt(at))) return false;
  if (text.charCodeAt(length - 3) !== 43 || text.charCodeAt(length - 2) !== 48 || text.charCodeAt(length - 1) !== 48)
    return false;
  if (length === 22) return true;
  if (length === 23 || text.charCodeAt(19) !== 46) return false;
  for (let at = 20; at < length - 3; at++) if (!isDigit(text.charCodeAt(at))) return false;
  return true;
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

function digits(text: string, from: number, count: number): number {
  let value = 0;
  for (let at = from; at < from + count; at++) value = value * 10 + text.charCodeAt(at) - 48;
  return value;
}
