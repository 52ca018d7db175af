// Text rules shared by every place that takes a name (decisions.md §1, §4) and by the guard that
// keeps U+0000 away from Postgres (lib/rpc/text-guard.ts).

// Unicode White_Space, which is what decisions.md §4 trims ("cleaned"); \s in JS is a superset that
// adds U+FEFF, so the set is spelled out.
const whiteSpace = "\\u0009-\\u000D\\u0020\\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";
const edges = new RegExp(`^[${whiteSpace}]+|[${whiteSpace}]+$`, "gu");
const control = /\p{Cc}/u;

/** `text` without Unicode White_Space at either end (U+FEFF and other format characters stay). */
export function trimWhiteSpace(text: string): string {
  return text.replace(edges, "");
}

/** True when `text` holds a control character (Unicode category Cc: U+0000 to U+001F, U+007F to U+009F). */
export function hasControl(text: string): boolean {
  return control.test(text);
}

/** True when `text` holds U+0000, which no Postgres text value can store. */
export function hasNul(text: string): boolean {
  return text.includes("\u0000");
}

const loneSurrogate = /\p{Cs}/u;

/**
 * True when `text` holds a lone surrogate (U+D800 to U+DFFF not in a pair): JSON can spell one
 * ("\ud800"), but it is no character, and encoding it as UTF-8 turns it into U+FFFD.
 */
export function hasLoneSurrogate(text: string): boolean {
  return loneSurrogate.test(text);
}

/** How many code points `text` holds (decisions.md §1 counts lengths so, not in UTF-16 units). */
export function codePointLength(text: string): number {
  let count = 0;
  for (const _ of text) count++;
  return count;
}
