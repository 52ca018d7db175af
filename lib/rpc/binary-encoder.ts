import {
  type DescField,
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
  protoInt64,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";

/**
 * `toBinary`, byte for byte, compiled once per schema: the message is measured first, then written into
 * one buffer (protobuf-es copies chunks at every nesting level). Schemas with groups, required fields or
 * non-string map keys, and values this encoder does not expect, go to `toBinary`, which decides.
 */
export function encodeBinary<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Uint8Array {
  try {
    const bytes = encodeCompiled(schema, message);
    if (bytes) return bytes;
  } catch {
    // A value outside what the fast path takes: toBinary below decides.
  }
  return toBinary(schema, message);
}

/**
 * The fast path alone: the message's bytes, or undefined when its schema is left to toBinary;
 * throws for a value it does not take. `message` may also be a plain init object (what a handler
 * returns), nested ones included: it then writes what `toBinary(schema, create(schema, init))`
 * writes, without building the message.
 */
export function encodeCompiled<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc> | MessageInitShape<Desc>,
): Uint8Array | undefined {
  const codec = codecOf(schema);
  if (!codec) return undefined;
  const sizes: number[] = [];
  const size = codec.size(message as AnyMessage, sizes);
  const sink: Sink = { buf: Buffer.allocUnsafe(size), pos: 0, sizes, next: 0 };
  codec.write(message as AnyMessage, sink);
  if (sink.pos !== size) throw new Error(`${schema.typeName}: wrote ${sink.pos} bytes of ${size}`);
  return sink.buf;
}

type AnyMessage = Record<string, unknown>;

/** `sizes`: the lengths the size pass measured, in the order the write pass meets them. */
type Sink = { buf: Buffer; pos: number; sizes: number[]; next: number };

type MessageCodec = {
  /** The encoded length of `message`; pushes the lengths the write pass needs onto `sizes`. */
  size(message: AnyMessage, sizes: number[]): number;
  write(message: AnyMessage, sink: Sink): void;
};

const codecs = new WeakMap<DescMessage, MessageCodec | null>();

/** The compiled codec of a schema, or null when toBinary must encode it. Messages may nest themselves. */
function codecOf(schema: DescMessage): MessageCodec | null {
  const known = codecs.get(schema);
  if (known !== undefined) return known;
  // Compiled lazily per field, so a recursive schema refers to its own codec before it is complete.
  let fields: FieldCodec[] | null | undefined;
  const codec: MessageCodec = {
    size(message, sizes) {
      let size = 0;
      for (const field of fields as FieldCodec[]) size += field.size(message, sizes);
      for (const unknown of unknownsOf(message))
        size += varintSize(tagOf(unknown.no, unknown.wireType)) + unknown.data.length;
      return size;
    },
    write(message, sink) {
      for (const field of fields as FieldCodec[]) field.write(message, sink);
      for (const unknown of unknownsOf(message)) {
        writeVarint32(sink, tagOf(unknown.no, unknown.wireType));
        sink.buf.set(unknown.data, sink.pos);
        sink.pos += unknown.data.length;
      }
    },
  };
  codecs.set(schema, codec);
  fields = compileFields(schema);
  if (fields === null) {
    codecs.set(schema, null);
    return null;
  }
  return codec;
}

type Unknown = { no: number; wireType: number; data: Uint8Array };

function unknownsOf(message: AnyMessage): readonly Unknown[] {
  return (message.$unknown as Unknown[] | undefined) ?? [];
}

type FieldCodec = {
  /** The field's encoded length in `message`, 0 when it is not set. */
  size(message: AnyMessage, sizes: number[]): number;
  write(message: AnyMessage, sink: Sink): void;
};

/** google.protobuf.FeatureSet.FieldPresence. */
const IMPLICIT = 2;
const LEGACY_REQUIRED = 3;

const WIRE_VARINT = 0;
const WIRE_BIT64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_BIT32 = 5;

function compileFields(schema: DescMessage): FieldCodec[] | null {
  const compiled: FieldCodec[] = [];
  for (const field of [...schema.fields].sort((a, b) => a.number - b.number)) {
    const codec = compileField(field);
    if (!codec) return null;
    compiled.push(codec);
  }
  return compiled;
}

/** The value of a field in `message` when it is set (toBinary's isSet), else undefined. */
function presentValue(field: DescField): (message: AnyMessage) => unknown {
  const name = field.localName;
  if (field.oneof) {
    const group = field.oneof.localName;
    return (message) => {
      const selected = message[group] as { case?: string; value?: unknown } | undefined;
      return selected?.case === name ? selected.value : undefined;
    };
  }
  // A list or a map is written when it holds something, whatever the field's presence says.
  if (field.fieldKind === "list")
    return (message) => ((message[name] as unknown[] | undefined)?.length ? message[name] : undefined);
  if (field.fieldKind === "map")
    return (message) =>
      Object.keys((message[name] as object | undefined) ?? {}).length > 0 ? message[name] : undefined;
  if (field.presence !== IMPLICIT) {
    return (message) => (Object.hasOwn(message, name) ? message[name] : undefined);
  }
  switch (field.fieldKind) {
    // Undefined only in a plain init object (see encodeCompiled), where it means the zero value.
    case "enum": {
      const zero = field.enum.values[0]?.number;
      return (message) => (message[name] !== zero ? message[name] : undefined);
    }
    case "scalar": {
      const isZero = zeroTest(field.scalar);
      return (message) => {
        const v = message[name];
        return v === undefined || isZero(v) ? undefined : v;
      };
    }
    case "message":
      return (message) => message[name];
  }
}

/** protobuf-es's isScalarZeroValue: +0 but not -0 for floats, 0n, 0 and "0" for 64-bit integers. */
function zeroTest(type: ScalarType): (value: unknown) => boolean {
  switch (type) {
    case ScalarType.BOOL:
      return (value) => value === false;
    case ScalarType.STRING:
      return (value) => value === "";
    case ScalarType.BYTES:
      return (value) => value instanceof Uint8Array && value.byteLength === 0;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return (value) => Object.is(value, 0);
    default:
      // biome-ignore lint/suspicious/noDoubleEquals: the loose comparison is protobuf-es's own (0n, 0 and "0").
      return (value) => value == 0;
  }
}

function compileField(field: DescField): FieldCodec | null {
  if (field.presence === LEGACY_REQUIRED) return null;
  const value = presentValue(field);
  switch (field.fieldKind) {
    case "scalar":
    case "enum": {
      const scalar = scalarCodec(field.fieldKind === "enum" ? ScalarType.INT32 : field.scalar);
      const tag = tagOf(field.number, scalar.wireType);
      const tagSize = varintSize(tag);
      return {
        size(message, sizes) {
          const v = value(message);
          return v === undefined ? 0 : tagSize + scalar.size(v, sizes);
        },
        write(message, sink) {
          const v = value(message);
          if (v === undefined) return;
          writeVarint32(sink, tag);
          scalar.write(v, sink);
        },
      };
    }
    case "message": {
      if (field.delimitedEncoding) return null;
      const nested = nestedCodec(field.number, field.message);
      return {
        size: (message, sizes) => {
          const v = value(message) as AnyMessage | undefined;
          return v === undefined ? 0 : nested.size(v, sizes);
        },
        write(message, sink) {
          const v = value(message) as AnyMessage | undefined;
          if (v !== undefined) nested.write(v, sink);
        },
      };
    }
    case "list":
      return listCodec(field, value);
    case "map":
      return mapCodec(field, value);
  }
}

/** A message as a length-delimited field `number`: tag, length, fields. */
function nestedCodec(
  number: number,
  schema: DescMessage,
): { size: MessageCodec["size"]; write: MessageCodec["write"] } {
  const tag = tagOf(number, WIRE_LENGTH_DELIMITED);
  const tagSize = varintSize(tag);
  let codec: MessageCodec | null | undefined;
  const resolve = () => {
    codec ??= codecOf(schema);
    if (!codec) throw new Error(`${schema.typeName} is encoded by toBinary`);
    return codec;
  };
  return {
    size(message, sizes) {
      const slot = sizes.length;
      sizes.push(0);
      const length = resolve().size(message, sizes);
      sizes[slot] = length;
      return tagSize + varintSize(length) + length;
    },
    write(message, sink) {
      writeVarint32(sink, tag);
      writeVarint32(sink, sink.sizes[sink.next++] as number);
      resolve().write(message, sink);
    },
  };
}

function listCodec(
  field: DescField & { fieldKind: "list" },
  value: (message: AnyMessage) => unknown,
): FieldCodec | null {
  if (field.listKind === "message") {
    if (field.delimitedEncoding) return null;
    const nested = nestedCodec(field.number, field.message);
    return {
      size(message, sizes) {
        const list = value(message) as AnyMessage[] | undefined;
        let size = 0;
        for (const item of list ?? []) size += nested.size(item, sizes);
        return size;
      },
      write(message, sink) {
        for (const item of (value(message) as AnyMessage[] | undefined) ?? []) nested.write(item, sink);
      },
    };
  }
  const scalar = scalarCodec(field.listKind === "enum" ? ScalarType.INT32 : field.scalar);
  if (field.packed) {
    const tag = tagOf(field.number, WIRE_LENGTH_DELIMITED);
    const tagSize = varintSize(tag);
    return {
      size(message, sizes) {
        const list = value(message) as unknown[] | undefined;
        // An empty packed list is not written, whatever the field's presence.
        if (!list || list.length === 0) return 0;
        const slot = sizes.length;
        sizes.push(0);
        let length = 0;
        for (const item of list) length += scalar.size(item, sizes);
        sizes[slot] = length;
        return tagSize + varintSize(length) + length;
      },
      write(message, sink) {
        const list = value(message) as unknown[] | undefined;
        if (!list || list.length === 0) return;
        writeVarint32(sink, tag);
        writeVarint32(sink, sink.sizes[sink.next++] as number);
        for (const item of list) scalar.write(item, sink);
      },
    };
  }
  const tag = tagOf(field.number, scalar.wireType);
  const tagSize = varintSize(tag);
  return {
    size(message, sizes) {
      let size = 0;
      for (const item of (value(message) as unknown[] | undefined) ?? []) size += tagSize + scalar.size(item, sizes);
      return size;
    },
    write(message, sink) {
      for (const item of (value(message) as unknown[] | undefined) ?? []) {
        writeVarint32(sink, tag);
        scalar.write(item, sink);
      }
    },
  };
}

/** Map entries as protobuf-es writes them: each a message with the key (1) and the value (2), both always written. */
function mapCodec(field: DescField & { fieldKind: "map" }, value: (message: AnyMessage) => unknown): FieldCodec | null {
  if (field.mapKey !== ScalarType.STRING) return null;
  const entryTag = tagOf(field.number, WIRE_LENGTH_DELIMITED);
  const entryTagSize = varintSize(entryTag);
  const key = scalarCodec(ScalarType.STRING);
  const keyTag = tagOf(1, WIRE_LENGTH_DELIMITED);
  let entryValue: { size(v: unknown, sizes: number[]): number; write(v: unknown, sink: Sink): void };
  if (field.mapKind === "message") {
    const nested = nestedCodec(2, field.message);
    entryValue = {
      size: (v, sizes) => nested.size(v as AnyMessage, sizes),
      write: (v, sink) => nested.write(v as AnyMessage, sink),
    };
  } else {
    const scalar = scalarCodec(field.mapKind === "enum" ? ScalarType.INT32 : field.scalar);
    const valueTag = tagOf(2, scalar.wireType);
    const valueTagSize = varintSize(valueTag);
    entryValue = {
      size: (v, sizes) => valueTagSize + scalar.size(v, sizes),
      write(v, sink) {
        writeVarint32(sink, valueTag);
        scalar.write(v, sink);
      },
    };
  }
  return {
    size(message, sizes) {
      const map = value(message) as Record<string, unknown> | undefined;
      if (!map) return 0;
      let size = 0;
      for (const k of Object.keys(map)) {
        const slot = sizes.length;
        sizes.push(0);
        const length = 1 + key.size(k, sizes) + entryValue.size(map[k], sizes);
        sizes[slot] = length;
        size += entryTagSize + varintSize(length) + length;
      }
      return size;
    },
    write(message, sink) {
      const map = value(message) as Record<string, unknown> | undefined;
      if (!map) return;
      for (const k of Object.keys(map)) {
        writeVarint32(sink, entryTag);
        writeVarint32(sink, sink.sizes[sink.next++] as number);
        writeVarint32(sink, keyTag);
        key.write(k, sink);
        entryValue.write(map[k], sink);
      }
    },
  };
}

type ScalarCodec = {
  wireType: number;
  /** The value's encoded length (without a tag); throws for a value toBinary must judge. */
  size(value: unknown, sizes: number[]): number;
  write(value: unknown, sink: Sink): void;
};

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;
const FLOAT32_MAX = 3.4028234663852886e38;

function int32Of(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < INT32_MIN || value > INT32_MAX)
    throw new RangeError("not an int32");
  return value;
}

function uint32Of(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > UINT32_MAX)
    throw new RangeError("not a uint32");
  return value;
}

function numberOf(value: unknown): number {
  if (typeof value !== "number") throw new TypeError("not a number");
  return value;
}

function float32Of(value: unknown): number {
  const v = numberOf(value);
  if (Number.isFinite(v) && (v > FLOAT32_MAX || v < -FLOAT32_MAX)) throw new RangeError("not a float32");
  return v;
}

function scalarCodec(type: ScalarType): ScalarCodec {
  switch (type) {
    case ScalarType.STRING:
      return {
        wireType: WIRE_LENGTH_DELIMITED,
        size(value, sizes) {
          if (typeof value !== "string") throw new TypeError("not a string");
          const length = utf8Length(value);
          sizes.push(length);
          return varintSize(length) + length;
        },
        write(value, sink) {
          const length = sink.sizes[sink.next++] as number;
          writeVarint32(sink, length);
          writeUtf8(sink, value as string, length);
        },
      };
    case ScalarType.BYTES:
      return {
        wireType: WIRE_LENGTH_DELIMITED,
        size(value) {
          if (!(value instanceof Uint8Array)) throw new TypeError("not bytes");
          return varintSize(value.byteLength) + value.byteLength;
        },
        write(value, sink) {
          const bytes = value as Uint8Array;
          writeVarint32(sink, bytes.byteLength);
          sink.buf.set(bytes, sink.pos);
          sink.pos += bytes.byteLength;
        },
      };
    case ScalarType.BOOL:
      return {
        wireType: WIRE_VARINT,
        size(value) {
          if (typeof value !== "boolean") throw new TypeError("not a bool");
          return 1;
        },
        write(value, sink) {
          sink.buf[sink.pos++] = value ? 1 : 0;
        },
      };
    case ScalarType.INT32:
      return {
        wireType: WIRE_VARINT,
        size: (value) => {
          const v = int32Of(value);
          return v < 0 ? 10 : varintSize(v);
        },
        write(value, sink) {
          const v = value as number;
          if (v >= 0) writeVarint32(sink, v);
          else writeVarint64(sink, v, -1);
        },
      };
    case ScalarType.UINT32:
      return {
        wireType: WIRE_VARINT,
        size: (value) => varintSize(uint32Of(value)),
        write: (value, sink) => writeVarint32(sink, value as number),
      };
    case ScalarType.SINT32:
      return {
        wireType: WIRE_VARINT,
        size: (value) => varintSize(zigzag32(int32Of(value))),
        write: (value, sink) => writeVarint32(sink, zigzag32(value as number)),
      };
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64: {
      const parts =
        type === ScalarType.UINT64
          ? (value: unknown) => protoInt64.uEnc(value as bigint)
          : type === ScalarType.INT64
            ? (value: unknown) => protoInt64.enc(value as bigint)
            : (value: unknown) => zigzag64(protoInt64.enc(value as bigint));
      return {
        wireType: WIRE_VARINT,
        size(value) {
          const { lo, hi } = parts(value);
          return varint64Size(lo, hi);
        },
        write(value, sink) {
          const { lo, hi } = parts(value);
          writeVarint64(sink, lo, hi);
        },
      };
    }
    case ScalarType.DOUBLE:
      return fixedCodec(8, numberOf, (buf, v, pos) => buf.writeDoubleLE(v as number, pos));
    case ScalarType.FLOAT:
      return fixedCodec(4, float32Of, (buf, v, pos) => buf.writeFloatLE(v as number, pos));
    case ScalarType.FIXED32:
      return fixedCodec(4, uint32Of, (buf, v, pos) => buf.writeUInt32LE(v as number, pos));
    case ScalarType.SFIXED32:
      return fixedCodec(4, int32Of, (buf, v, pos) => buf.writeInt32LE(v as number, pos));
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64: {
      const parts =
        type === ScalarType.FIXED64
          ? (value: unknown) => protoInt64.uEnc(value as bigint)
          : (value: unknown) => protoInt64.enc(value as bigint);
      return fixedCodec(8, parts, (buf, v, pos) => {
        const { lo, hi } = parts(v);
        buf.writeInt32LE(lo, pos);
        buf.writeInt32LE(hi, pos + 4);
      });
    }
  }
}

function fixedCodec(
  size: 4 | 8,
  check: (value: unknown) => unknown,
  put: (buf: Buffer, value: unknown, pos: number) => void,
): ScalarCodec {
  return {
    wireType: size === 8 ? WIRE_BIT64 : WIRE_BIT32,
    size(value) {
      check(value);
      return size;
    },
    write(value, sink) {
      put(sink.buf, value, sink.pos);
      sink.pos += size;
    },
  };
}

function tagOf(number: number, wireType: number): number {
  return ((number << 3) | wireType) >>> 0;
}

function zigzag32(value: number): number {
  return ((value << 1) ^ (value >> 31)) >>> 0;
}

function zigzag64({ lo, hi }: { lo: number; hi: number }): { lo: number; hi: number } {
  const sign = hi >> 31;
  return { lo: (lo << 1) ^ sign, hi: ((hi << 1) | (lo >>> 31)) ^ sign };
}

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

function varint64Size(lo: number, hi: number): number {
  if (hi === 0) return varintSize(lo >>> 0);
  // The high word's bits start at bit 32: 5 bytes carry 35 bits, each further byte 7 more.
  const h = hi >>> 0;
  if (h < 0x8) return 5;
  if (h < 0x400) return 6;
  if (h < 0x20000) return 7;
  if (h < 0x1000000) return 8;
  if (h < 0x80000000) return 9;
  return 10;
}

function writeVarint32(sink: Sink, value: number): void {
  const buf = sink.buf;
  let pos = sink.pos;
  while (value > 0x7f) {
    buf[pos++] = (value & 0x7f) | 0x80;
    value >>>= 7;
  }
  buf[pos++] = value;
  sink.pos = pos;
}

/** protobuf-es's varint64write: the low word 7 bits at a time, then the split byte, then the high word. */
function writeVarint64(sink: Sink, lo: number, hi: number): void {
  const buf = sink.buf;
  for (let i = 0; i < 28; i += 7) {
    const shift = lo >>> i;
    const hasNext = !(shift >>> 7 === 0 && hi === 0);
    buf[sink.pos++] = (hasNext ? shift | 0x80 : shift) & 0xff;
    if (!hasNext) return;
  }
  const splitBits = ((lo >>> 28) & 0x0f) | ((hi & 0x07) << 4);
  const hasMoreBits = hi >> 3 !== 0;
  buf[sink.pos++] = (hasMoreBits ? splitBits | 0x80 : splitBits) & 0xff;
  if (!hasMoreBits) return;
  for (let i = 3; i < 31; i += 7) {
    const shift = hi >>> i;
    const hasNext = shift >>> 7 !== 0;
    buf[sink.pos++] = (hasNext ? shift | 0x80 : shift) & 0xff;
    if (!hasNext) return;
  }
  buf[sink.pos++] = (hi >>> 31) & 0x01;
}

/** UTF-8 length as TextEncoder encodes: a lone surrogate becomes U+FFFD (3 bytes), as Buffer does too. */
function utf8Length(text: string): number {
  const length = text.length;
  for (let i = 0; i < length; i++) if (text.charCodeAt(i) > 0x7f) return Buffer.byteLength(text, "utf8");
  return length;
}

function writeUtf8(sink: Sink, text: string, byteLength: number): void {
  const buf = sink.buf;
  if (byteLength === text.length) {
    // Every character is ASCII: a UTF-8 length equal to the UTF-16 length allows nothing else.
    let pos = sink.pos;
    for (let i = 0; i < byteLength; i++) buf[pos++] = text.charCodeAt(i);
    sink.pos = pos;
    return;
  }
  sink.pos += buf.write(text, sink.pos, byteLength, "utf8");
}
