import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

let configured = false;

/** Longer strings go to TextEncoder or TextDecoder, whose fixed cost per call no longer dominates. */
export const ASCII_FAST_MAX = 256;

/** Nearly every string of an internal call is short ASCII, where TextEncoder's per-call cost dominates. */
function encodeAscii(text: string): Uint8Array<ArrayBuffer> | undefined {
  const length = text.length;
  if (length > ASCII_FAST_MAX) return undefined;
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code > 0x7f) return undefined;
    bytes[i] = code;
  }
  return bytes;
}

/**
 * protobuf-es's default TextDecoder drops a leading U+FEFF as a byte order mark, but U+FEFF is not
 * White_Space and decisions.md §4 trims nothing else. Idempotent; every RPC server and lean client calls it.
 */
export function keepByteOrderMarks(): void {
  if (configured) return;
  configured = true;
  const standard = getTextEncoding();
  const lenient = new TextDecoder("utf-8", { ignoreBOM: true });
  const strict = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });
  configureTextEncoding({
    encodeUtf8: (text) => encodeAscii(text) ?? standard.encodeUtf8(text),
    checkUtf8: (text) => standard.checkUtf8(text),
    decodeUtf8: (bytes, fatal) => (fatal ? strict : lenient).decode(bytes),
  });
}
