import { DomainError } from "../../lib/errors.js";
import { codePointLength, hasControl, trimWhiteSpace } from "../../lib/text.js";

/** Trimmed, then 1 to 64 code points, no control character; else INVALID_NAME (decisions.md §1, §4). */
export function parseName(raw: string, malformed = false): string {
  if (malformed)
    throw new DomainError("INVALID_NAME", "name must be a string of 1 to 64 characters with no control characters");
  const name = trimWhiteSpace(raw);
  const length = codePointLength(name);
  if (length < 1 || length > 64)
    throw new DomainError("INVALID_NAME", "name must be 1 to 64 characters after trimming");
  if (hasControl(name)) throw new DomainError("INVALID_NAME", "name must not contain control characters");
  return name;
}
