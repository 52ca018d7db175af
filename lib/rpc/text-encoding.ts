import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

let configured = false;

/** Longer strings go to TextEncoder or TextDecoder, whose fixed cost per call no longer dominates. */
export const ASCII_FAST_MAX = 256;

/**
 * The UTF-8 bytes of a short all-ASCII string (ids, names, versions: nearly every string an
 * internal call carries), or undefined for any other. TextEncoder costs about ten times as much per
 * short string, and protobuf-es encodes every string field with it: it was a tenth of the servers
 * service's CPU for a 20-entry ListServersResponse. ASCII encodes to the same bytes either way.
 */
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
 * Makes protobuf's binary decoding keep a leading U+FEFF in string fields. protobuf-es decodes
 * every string with a default TextDecoder, which drops a leading U+FEFF as a byte order mark, so a
 * name "\ufeffx" arrived at a service as "x" and "\ufeff" as "" (INVALID_NAME), although U+FEFF is
 * not White_Space and decisions.md §4 trims nothing else. createRpcServer and createLeanTransport
 * call it, so every process that serves or makes internal calls decodes this way. Calling it
 * again changes nothing.
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
