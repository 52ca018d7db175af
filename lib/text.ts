// Unicode White_Space, which decisions.md §4 trims; JS's \s adds U+FEFF, so the set is spelled out.
const whiteSpace = "\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";
const edges = new RegExp(`^[${whiteSpace}]+|[${whiteSpace}]+$`, "gu");
const control = /\p{Cc}/u;

/** U+FEFF and other format characters stay. */
export function trimWhiteSpace(text: string): string {
  return text.replace(edges, "");
}

/** Unicode category Cc. */
export function hasControl(text: string): boolean {
  return control.test(text);
}

/** No Postgres text value can store U+0000. */
export function hasNul(text: string): boolean {
  return text.includes("\u0000");
}

const loneSurrogate = /\p{Cs}/u;

/** JSON can spell one ("\ud800"), but it is no character: UTF-8 turns it into U+FFFD. */
export function hasLoneSurrogate(text: string): boolean {
  return loneSurrogate.test(text);
}

/** decisions.md §1 counts lengths so, not in UTF-16 units. */
export function codePointLength(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}
