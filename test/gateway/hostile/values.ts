import type { Prng } from "./prng.js";

// Hostile values, as the text that goes on the wire: JSON value texts for bodies, raw (already
// percent-encoded or not) path segments and query values.

const controls = [..."\u0001\u0007\u0008\t\n\u000b\u000c\r\u001b\u001f\u007f\u0080\u0085\u009f"];
const unicode = [
  "😀",
  "\ufeff",
  "\u202eevil",
  "e\u0301",
  "\u2028",
  "\u3000",
  "\u00a0",
  "全角",
  "\ufffd",
  "\u{10ffff}",
  "\u200b",
];

/** A version 4 UUID drawn from `prng`, so that a seed replays the same ids. */
export function prngUuid(prng: Prng): string {
  const hex = Array.from({ length: 32 }, () => prng.int(16).toString(16));
  hex[12] = "4";
  hex[16] = "89ab"[prng.int(4)] as string;
  const h = hex.join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A JSON string literal of hostile text (lone surrogates written as escapes, which JSON allows). */
export function hostileString(prng: Prng, validish: () => string): string {
  switch (prng.int(10)) {
    case 0:
      return JSON.stringify("");
    case 1:
      return JSON.stringify("x".repeat(prng.pick([61, 65, 81, 121, 300, 5000])));
    case 2:
      return JSON.stringify(`${validish()}\u0000${prng.chance(0.5) ? "" : validish()}`);
    case 3:
      return JSON.stringify(`${validish()}${prng.pick(controls)}`);
    case 4:
      return JSON.stringify(prng.pick(unicode) + validish() + prng.pick(unicode));
    case 5:
      return prng.pick(['"\\ud800"', '"a\\udfff"', '"\\u0000"', '"\\ud83d\\ude00"']);
    case 6:
      return JSON.stringify(prng.pick([" ", "\t\n", "\u3000\u00a0", "\ufeff"]));
    default:
      return JSON.stringify(validish());
  }
}

/** Any JSON value text of the wrong type or magnitude. */
export function wrongJson(prng: Prng): string {
  return prng.pick([
    "0",
    "-1",
    "1.5",
    "1e400",
    "-1e400",
    "9007199254740993",
    "123456789012345678901234567890",
    "-0",
    "true",
    "false",
    "null",
    "[]",
    "{}",
    '["x"]',
    '{"a":1}',
    '"5"',
    "[[[[[[[[[[]]]]]]]]]]",
  ]);
}

/** A raw path segment for an `:id`. */
export function hostileSegment(prng: Prng, known: readonly string[]): string {
  const uuid = () => prngUuid(prng);
  return prng.pick([
    () => uuid(),
    () => uuid(),
    () => (known.length > 0 ? prng.pick(known) : uuid()),
    () => uuid().toUpperCase(),
    () => `{${uuid()}}`,
    () => "a".repeat(prng.pick([37, 101, 300, 3000])),
    () => "%E0%A4%A",
    () => "%FF",
    () => "%",
    () => "%00",
    () => `${uuid()}%00`,
    () => "%01",
    () => "%0A",
    () => "%F0%9F%98%80",
    () => "..",
    () => "%2E%2E",
    () => "%2F",
    () => "%20",
    () => "null",
    () => "0",
    () => uuid().replace(/-/g, ""),
    () => encodeURIComponent("ü\ufeff"),
  ])();
}

/** A raw query value for a parameter. */
export function hostileQueryValue(prng: Prng, validish: () => string): string {
  return prng.pick([
    validish,
    validish,
    () => "",
    () => "0",
    () => "101",
    () => "-1",
    () => "+1",
    () => "1e2",
    () => " 5",
    () => "0005",
    () => "%ZZ",
    () => "%FF%FE",
    () => "%00",
    () => "%01",
    () => "%",
    () => "a".repeat(prng.pick([129, 2000])),
    () => prngUuid(prng),
    () => "%E2%80%AE",
    () => "%F0%9F%98%80",
    () => "a+b",
    () => "a=b",
  ])();
}
