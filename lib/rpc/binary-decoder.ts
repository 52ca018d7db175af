import { type DescField, type DescMessage, fromBinary, type MessageShape, ScalarType } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ASCII_FAST_MAX } from "./text-encoding.js";

/**
 * `fromBinary`'s message, compiled once per proto3 schema into field readers that set fields directly.
 * The wire is read by protobuf-es's own BinaryReader, so what is accepted does not change. Other schemas,
 * groups and any input this decoder stops at go to `fromBinary`, which answers them.
 */
export function decodeBinary<Desc extends DescMessage>(schema: Desc, bytes: Uint8Array): MessageShape<Desc> {
  try {
    const message = decodeCompiled(schema, bytes);
    if (message) return message;
  } catch {
    // Bytes this decoder does not take: fromBinary below decides.
  }
  return fromBinary(schema, bytes);
}

/** Undefined when the schema is left to fromBinary; throws for bytes it does not take. Exported for tests. */
export function decodeCompiled<Desc extends DescMessage>(
  schema: Desc,
  bytes: Uint8Array,
): MessageShape<Desc> | undefined {
  const codec = codecOf(schema);
  if (!codec) return undefined;
  const message = codec.zero();
  codec.read(message, new Reader(bytes), bytes.byteLength, 0);
  return message as MessageShape<Desc>;
}

/**
 * An all-ASCII string is read from the Buffer as latin1, which for ASCII is its UTF-8 text (and valid, so
 * `strict` has nothing to refuse), not as a `subarray` plus TextDecoder; any other string goes the usual way.
 */
class Reader extends BinaryReader {
  private readonly buffer: Buffer | undefined;

  constructor(bytes: Uint8Array) {
    super(bytes);
    this.buffer = Buffer.isBuffer(bytes) ? bytes : undefined;
  }

  override string(strict?: boolean): string {
    const buffer = this.buffer;
    if (buffer === undefined) return super.string(strict);
    const start = this.pos;
    const length = this.uint32();
    const from = this.pos;
    const to = from + length;
    if (length <= ASCII_FAST_MAX && to <= this.len && isAscii(buffer, from, to)) {
      this.pos = to;
      return buffer.toString("latin1", from, to);
    }
    this.pos = start;
    return super.string(strict);
  }
}

function isAscii(bytes: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if ((bytes[i] as number) > 0x7f) return false;
  return true;
}

type AnyMessage = Record<string, unknown>;
type Unknown = { no: number; wireType: WireType; data: Uint8Array };

type MessageCodec = {
  /** A message with every field at its zero value, as `create(schema)` makes it. */
  zero(): AnyMessage;
  /** Reads fields into `message` up to `end`, merging as fromBinary does. */
  read(message: AnyMessage, reader: BinaryReader, end: number, depth: number): void;
};

type FieldReader = (message: AnyMessage, reader: BinaryReader, wireType: WireType, depth: number) => void;

/** google.protobuf.Edition.EDITION_PROTO3 and FeatureSet.FieldPresence.IMPLICIT. */
const EDITION_PROTO3 = 999;
const IMPLICIT = 2;
const RECURSION_LIMIT = 100;

const codecs = new WeakMap<DescMessage, MessageCodec | null>();

function codecOf(schema: DescMessage): MessageCodec | null {
  const known = codecs.get(schema);
  if (known !== undefined) return known;
  if (
    schema.file.edition !== EDITION_PROTO3 ||
    schema.fields.some((f) => "delimitedEncoding" in f && f.delimitedEncoding)
  ) {
    codecs.set(schema, null);
    return null;
  }
  const readers: (FieldReader | undefined)[] = [];
  const zero = zeroFactory(schema);
  const codec: MessageCodec = {
    zero,
    read(message, reader, end, depth) {
      if (depth >= RECURSION_LIMIT) throw new Error("maximum recursion depth reached");
      let unknowns = message.$unknown as Unknown[] | undefined;
      while (reader.pos < end) {
        const [fieldNo, wireType] = reader.tag();
        const read = readers[fieldNo];
        if (read) {
          read(message, reader, wireType, depth);
          continue;
        }
        const data = reader.skip(wireType, fieldNo, RECURSION_LIMIT - depth - 1);
        unknowns ??= [];
        unknowns.push({ no: fieldNo, wireType, data });
      }
      if (reader.pos !== end) throw new Error("a field ran past its message");
      if (unknowns && unknowns.length > 0) message.$unknown = unknowns;
    },
  };
  // Set before the fields compile, so that a message that nests itself finds its own codec.
  codecs.set(schema, codec);
  for (const field of schema.fields) readers[field.number] = fieldReader(field);
  return codec;
}

/** proto3's zero message: oneofs unselected, implicit fields at their zero value, the rest absent. */
function zeroFactory(schema: DescMessage): () => AnyMessage {
  const zeros: [string, () => unknown][] = [];
  for (const member of schema.members) {
    if (member.kind === "oneof") zeros.push([member.localName, () => ({ case: undefined })]);
    else if (member.presence === IMPLICIT) zeros.push([member.localName, zeroValue(member)]);
  }
  const typeName = schema.typeName;
  // One literal compiled per schema: a keyed-store loop shared by every schema is megamorphic. Names are
  // JSON-quoted local names (protoCamelCase leaves no underscore, so never `__proto__`).
  const fields = zeros.map(([name], i) => `${JSON.stringify(name)}: zeros[${i}]()`);
  const make = new Function("typeName", "zeros", `return () => ({ $typeName: typeName, ${fields.join(", ")} });`);
  return make(
    typeName,
    zeros.map(([, value]) => value),
  ) as () => AnyMessage;
}

/** Compiled per name: one keyed store shared by every field of every schema is megamorphic. */
function propertySetter(name: string): (message: AnyMessage, value: unknown) => void {
  return new Function("message", "value", `message[${JSON.stringify(name)}] = value;`) as (
    message: AnyMessage,
    value: unknown,
  ) => void;
}

function zeroValue(field: DescField): () => unknown {
  switch (field.fieldKind) {
    case "list":
      return () => [];
    case "map":
      return () => ({});
    case "enum": {
      const zero = field.enum.values[0]?.number ?? 0;
      return () => zero;
    }
    case "scalar": {
      const zero = scalarZero(field.scalar, field.longAsString);
      return () => zero;
    }
    case "message":
      return () => undefined;
  }
}

function scalarZero(type: ScalarType, longAsString: boolean): unknown {
  switch (type) {
    case ScalarType.STRING:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.BYTES:
      return new Uint8Array(0);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return longAsString ? "0" : 0n;
    default:
      return 0;
  }
}

/** How to read one value of a scalar type, as fromBinary's readScalar does; 64-bit ones as strings when asked. */
function scalarRead(type: ScalarType, validateUtf8: boolean, longAsString: boolean): (reader: BinaryReader) => unknown {
  const long = (read: (reader: BinaryReader) => unknown) =>
    longAsString ? (reader: BinaryReader) => String(read(reader)) : read;
  switch (type) {
    case ScalarType.STRING:
      return (reader) => reader.string(validateUtf8);
    case ScalarType.BOOL:
      return (reader) => reader.bool();
    case ScalarType.DOUBLE:
      return (reader) => reader.double();
    case ScalarType.FLOAT:
      return (reader) => reader.float();
    case ScalarType.INT32:
      return (reader) => reader.int32();
    case ScalarType.INT64:
      return long((reader) => reader.int64());
    case ScalarType.UINT64:
      return long((reader) => reader.uint64());
    case ScalarType.FIXED64:
      return long((reader) => reader.fixed64());
    case ScalarType.BYTES:
      return (reader) => reader.bytes();
    case ScalarType.FIXED32:
      return (reader) => reader.fixed32();
    case ScalarType.SFIXED32:
      return (reader) => reader.sfixed32();
    case ScalarType.SFIXED64:
      return long((reader) => reader.sfixed64());
    case ScalarType.SINT64:
      return long((reader) => reader.sint64());
    case ScalarType.UINT32:
      return (reader) => reader.uint32();
    case ScalarType.SINT32:
      return (reader) => reader.sint32();
  }
}

/** A nested message: merged into `into` when given (a message field seen twice), else a new one. */
function nestedRead(schema: DescMessage): (reader: BinaryReader, depth: number, into?: AnyMessage) => AnyMessage {
  let codec: MessageCodec | null | undefined;
  return (reader, depth, into) => {
    codec ??= codecOf(schema);
    if (!codec) throw new Error(`${schema.typeName} is decoded by fromBinary`);
    const length = reader.uint32();
    const message = into ?? codec.zero();
    codec.read(message, reader, reader.pos + length, depth + 1);
    return message;
  };
}

function fieldReader(field: DescField): FieldReader {
  const name = field.localName;
  // A oneof member sets the group's { case, value }; a message member merges into the selected one.
  const store = field.oneof
    ? ((group: string) => (message: AnyMessage, value: unknown) => {
        message[group] = { case: name, value };
      })(field.oneof.localName)
    : propertySetter(name);
  const current = field.oneof
    ? ((group: string) => (message: AnyMessage) => {
        const selected = message[group] as { case?: string; value?: unknown };
        return selected.case === name ? (selected.value as AnyMessage) : undefined;
      })(field.oneof.localName)
    : (message: AnyMessage) => message[name] as AnyMessage | undefined;
  switch (field.fieldKind) {
    case "scalar":
    case "enum": {
      const read =
        field.fieldKind === "enum"
          ? (reader: BinaryReader) => reader.int32()
          : scalarRead(field.scalar, field.utf8Validation, field.longAsString);
      return (message, reader) => store(message, read(reader));
    }
    case "message": {
      const read = nestedRead(field.message);
      return (message, reader, _wireType, depth) => store(message, read(reader, depth, current(message)));
    }
    case "list": {
      if (field.listKind === "message") {
        const read = nestedRead(field.message);
        return (message, reader, _wireType, depth) => {
          (message[name] as unknown[]).push(read(reader, depth));
        };
      }
      const type = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
      const read = scalarRead(type, field.utf8Validation, field.listKind === "scalar" && field.longAsString);
      const packable = type !== ScalarType.STRING && type !== ScalarType.BYTES;
      return (message, reader, wireType) => {
        const list = message[name] as unknown[];
        if (!packable || wireType !== WireType.LengthDelimited) {
          list.push(read(reader));
          return;
        }
        const end = reader.uint32() + reader.pos;
        while (reader.pos < end) list.push(read(reader));
      };
    }
    case "map":
      return mapReader(field);
  }
}

/** One map entry, as fromBinary reads it: key 1, value 2, either missing is its zero value. */
function mapReader(field: DescField & { fieldKind: "map" }): FieldReader {
  const name = field.localName;
  if (field.mapKey !== ScalarType.STRING) {
    return () => {
      throw new Error("map keys other than strings are decoded by fromBinary");
    };
  }
  const readKey = scalarRead(ScalarType.STRING, field.utf8Validation, false);
  let readValue: (reader: BinaryReader, depth: number) => unknown;
  let zero: () => unknown;
  if (field.mapKind === "message") {
    const nested = nestedRead(field.message);
    readValue = (reader, depth) => nested(reader, depth);
    const schema = field.message;
    zero = () => {
      const codec = codecOf(schema);
      if (!codec) throw new Error(`${schema.typeName} is decoded by fromBinary`);
      return codec.zero();
    };
  } else {
    const read =
      field.mapKind === "enum"
        ? (reader: BinaryReader) => reader.int32()
        : scalarRead(field.scalar, field.utf8Validation, false);
    readValue = (reader) => read(reader);
    const value = field.mapKind === "enum" ? (field.enum.values[0]?.number ?? 0) : scalarZero(field.scalar, false);
    zero = () => value;
  }
  return (message, reader, _wireType, depth) => {
    const end = reader.uint32() + reader.pos;
    let key: string | undefined;
    let value: unknown;
    while (reader.pos < end) {
      const [fieldNo] = reader.tag();
      if (fieldNo === 1) key = readKey(reader) as string;
      else if (fieldNo === 2) value = readValue(reader, depth);
      // fromBinary reads only these two; anything else in an entry is not its to read either.
      else throw new Error("unexpected field in a map entry");
    }
    (message[name] as Record<string, unknown>)[key ?? ""] = value === undefined ? zero() : value;
  };
}
