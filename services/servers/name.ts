import { DomainError } from "../../lib/errors.js";

// Unicode White_Space, which is what decisions.md §4 trims ("cleaned"); \s in JS is a superset that
// adds U+FEFF, so the set is spelled out.
const whiteSpace = "\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";
const edges = new RegExp(`^[${whiteSpace}]+|[${whiteSpace}]+$`, "gu");
const control = /\p{Cc}/u;

/**
 * A server or category name: trimmed of white space at both ends, then 1 to 64 code points with no
 * control character (Unicode Cc); anything else is INVALID_NAME (decisions.md §1, §4).
 */
export function parseName(raw: string, malformed = false): string {
  if (malformed) throw new DomainError("INVALID_NAME", "name must be a string");
  const name = raw.replace(edges, "");
  const length = [...name].length;
  if (length < 1 || length > 64)
    throw new DomainError("INVALID_NAME", "name must be 1 to 64 characters after trimming");
  if (control.test(name)) throw new DomainError("INVALID_NAME", "name must not contain control characters");
  return name;
}
