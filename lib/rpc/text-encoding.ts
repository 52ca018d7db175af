import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";

/**
 * Makes protobuf's binary decoding keep a leading U+FEFF in string fields. protobuf-es decodes
 * every string with a default TextDecoder, which drops a leading U+FEFF as a byte order mark, so a
 * name "\ufeffx" arrived at a service as "x" and "\ufeff" as "" (INVALID_NAME), although U+FEFF is
 * not White_Space and decisions.md §4 trims nothing else. createRpcServer and createLeanTransport
 * call it, so every process that serves or makes internal calls decodes this way. Calling it
 * again changes nothing.
 */
export function keepByteOrderMarks(): void {
  const standard = getTextEncoding();
  const lenient = new TextDecoder("utf-8", { ignoreBOM: true });
  const strict = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });
  configureTextEncoding({
    encodeUtf8: (text) => standard.encodeUtf8(text),
    checkUtf8: (text) => standard.checkUtf8(text),
    decodeUtf8: (bytes, fatal) => (fatal ? strict : lenient).decode(bytes),
  });
}
