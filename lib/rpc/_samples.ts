// Random messages of every schema the services use, and of schemas beyond them, for the tests
// that hold lib/rpc's binary encoder and decoder to protobuf-es's toBinary and fromBinary.
import {
  create,
  createFileRegistry,
  type DescField,
  type DescMessage,
  fromBinary,
  protoInt64,
  ScalarType,
} from "@bufbuild/protobuf";
import {
  DescriptorProtoSchema,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FieldDescriptorProtoSchema,
  FileDescriptorProtoSchema,
  StructSchema,
  ValueSchema,
} from "@bufbuild/protobuf/wkt";
import { file_grpc_health_v1_health } from "../../gen/grpc/health/v1/health_pb.js";
import { file_replay_common_v1_common } from "../../gen/replay/common/v1/common_pb.js";
import { file_replay_events_v1_identity } from "../../gen/replay/events/v1/identity_pb.js";
import { file_replay_events_v1_replays } from "../../gen/replay/events/v1/replays_pb.js";
import { file_replay_events_v1_servers } from "../../gen/replay/events/v1/servers_pb.js";
import { file_replay_identity_v1_admin } from "../../gen/replay/identity/v1/admin_pb.js";
import { file_replay_markers_v1_markers } from "../../gen/replay/markers/v1/markers_pb.js";
import { file_replay_replays_v1_recording } from "../../gen/replay/replays/v1/recording_pb.js";
import { file_replay_replays_v1_replays } from "../../gen/replay/replays/v1/replays_pb.js";
import { file_replay_servers_v1_recorder } from "../../gen/replay/servers/v1/recorder_pb.js";
import { file_replay_servers_v1_servers } from "../../gen/replay/servers/v1/servers_pb.js";
import { file_replay_webhooks_v1_webhooks } from "../../gen/replay/webhooks/v1/webhooks_pb.js";

const ourFiles = [
  file_grpc_health_v1_health,
  file_replay_common_v1_common,
  file_replay_events_v1_identity,
  file_replay_events_v1_replays,
  file_replay_events_v1_servers,
  file_replay_identity_v1_admin,
  file_replay_markers_v1_markers,
  file_replay_replays_v1_recording,
  file_replay_replays_v1_replays,
  file_replay_servers_v1_recorder,
  file_replay_servers_v1_servers,
  file_replay_webhooks_v1_webhooks,
];
export const ourSchemas = ourFiles.flatMap((file) => file.messages);
// Beyond what proto/ uses: recursion, a map of messages and a oneof (Struct/Value), proto2 presence
// and defaults (descriptor.proto).
export const testSchemas = everyScalarSchema();
export const moreSchemas: DescMessage[] = [
  StructSchema,
  ValueSchema,
  FieldDescriptorProtoSchema,
  DescriptorProtoSchema,
  testSchemas.all,
  testSchemas.intKeys,
];

/** Every scalar type in every shape, and int32 map keys (left to toBinary): what proto/ does not use yet. */
function everyScalarSchema(): { all: DescMessage; intKeys: DescMessage } {
  const types = Object.values(FieldDescriptorProto_Type).filter(
    (t): t is FieldDescriptorProto_Type =>
      typeof t === "number" &&
      ![FieldDescriptorProto_Type.GROUP, FieldDescriptorProto_Type.MESSAGE, FieldDescriptorProto_Type.ENUM].includes(t),
  );
  const { OPTIONAL, REPEATED } = FieldDescriptorProto_Label;
  let number = 0;
  const field = (name: string, type: FieldDescriptorProto_Type, label = OPTIONAL, extra = {}) => ({
    name,
    number: ++number,
    type,
    label,
    jsonName: name,
    ...extra,
  });
  const entry = (name: string, key: FieldDescriptorProto_Type, value: FieldDescriptorProto_Type) => ({
    name,
    field: [field("key", key), field("value", value)].map((f, i) => ({ ...f, number: i + 1 })),
    options: { mapEntry: true },
  });
  const fields = types.flatMap((type) => [
    field(`s${type}`, type),
    field(`r${type}`, type, REPEATED),
    field(`u${type}`, type, REPEATED, { options: { packed: false } }),
    field(`m${type}`, FieldDescriptorProto_Type.MESSAGE, REPEATED, { typeName: `.t.All.M${type}Entry` }),
  ]);
  const proto = create(FileDescriptorProtoSchema, {
    name: "t.proto",
    package: "t",
    syntax: "proto3",
    messageType: [
      {
        name: "All",
        field: fields,
        nestedType: types.map((type) => entry(`M${type}Entry`, FieldDescriptorProto_Type.STRING, type)),
      },
      {
        name: "IntKeys",
        field: [field("ikeys", FieldDescriptorProto_Type.MESSAGE, REPEATED, { typeName: ".t.IntKeys.IkeysEntry" })],
        nestedType: [entry("IkeysEntry", FieldDescriptorProto_Type.INT32, FieldDescriptorProto_Type.STRING)],
      },
    ],
  });
  const registry = createFileRegistry(proto, () => undefined);
  const [all, intKeys] = [registry.getMessage("t.All"), registry.getMessage("t.IntKeys")];
  if (!all || !intKeys) throw new Error("t.proto did not build");
  return { all, intKeys };
}

/** A seeded generator, so a failure names a case that replays. */
export function random(seed: number) {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 0x100000000;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  return { next, pick, int: (n: number) => Math.floor(next() * n) };
}
type Random = ReturnType<typeof random>;

const strings = [
  "",
  "a",
  "server-01",
  "ünïcödé",
  "😀 emoji",
  "\ud800 lone",
  "x".repeat(300),
  "é".repeat(200),
  "\u0000",
];

function scalarValue(type: ScalarType, r: Random): unknown {
  switch (type) {
    case ScalarType.STRING:
      return r.pick(strings);
    case ScalarType.BYTES:
      return r.pick([new Uint8Array(0), new Uint8Array([0]), new Uint8Array(200).fill(7)]);
    case ScalarType.BOOL:
      return r.next() < 0.5;
    case ScalarType.DOUBLE:
      return r.pick([0, -0, 1.5, -2.25e300, Number.NaN, Number.POSITIVE_INFINITY, Number.MIN_VALUE]);
    case ScalarType.FLOAT:
      return r.pick([0, -0, 1.5, -3.4e38, Number.NaN, Number.NEGATIVE_INFINITY]);
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return r.pick(signed32);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return r.pick(unsigned32);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return protoInt64.uParse(r.pick(unsigned64));
    default:
      return protoInt64.parse(r.pick(signed64));
  }
}

const unsigned32 = [0, ...Array.from({ length: 32 }, (_, k) => [2 ** k, 2 ** k - 1]).flat(), 0xffffffff];
const signed32 = [...Array.from({ length: 31 }, (_, k) => [2 ** k, 2 ** k - 1, -(2 ** k)]).flat(), -0x80000000];

/** Every varint length: 2^k - 1 and 2^k for each k, and their negatives where signed. */
const powers = Array.from({ length: 64 }, (_, k) => 1n << BigInt(k));
const unsigned64 = [0n, ...powers, ...powers.map((p) => p - 1n), 2n ** 64n - 1n].map(String);
const signed64 = [...powers.slice(0, 63).flatMap((p) => [p, p - 1n, -p, 1n - p]), -(2n ** 63n), 2n ** 63n - 1n].map(
  String,
);

function fieldValue(field: DescField, r: Random, depth: number): unknown {
  const one = (kind: "scalar" | "enum" | "message", scalar: ScalarType | undefined, schema?: DescMessage) => {
    if (kind === "message") return randomInit(schema as DescMessage, r, depth + 1);
    if (kind === "enum") {
      const values = (field.enum?.values ?? []).map((v) => v.number);
      return r.next() < 0.9 ? r.pick(values) : 99;
    }
    return scalarValue(scalar as ScalarType, r);
  };
  switch (field.fieldKind) {
    case "scalar":
      return one("scalar", field.scalar);
    case "enum":
      return one("enum", undefined);
    case "message":
      return one("message", undefined, field.message);
    case "list":
      return Array.from({ length: r.int(4) }, () => one(field.listKind, field.scalar, field.message));
    case "map":
      return Object.fromEntries(
        Array.from({ length: r.int(4) }, () => [r.pick(strings), one(field.mapKind, field.scalar, field.message)]),
      );
  }
}

/** A message init with a random subset of fields set, some to their zero values. */
export function randomInit(schema: DescMessage, r: Random, depth = 0): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  if (depth > 3) return init;
  for (const field of schema.fields) {
    if (field.oneof || r.next() < 0.4) continue;
    init[field.localName] = fieldValue(field, r, depth);
  }
  for (const oneof of schema.oneofs) {
    if (r.next() < 0.3) continue;
    const field = r.pick(oneof.fields);
    init[oneof.localName] = { case: field.localName, value: fieldValue(field, r, depth) };
  }
  return init;
}

/** The same message with unknown fields: a varint, a length-delimited and a fixed64 field numbers it does not have. */
export function withUnknownFields(schema: DescMessage, bytes: Uint8Array) {
  const extra = Uint8Array.from([
    0xb8, 0x3e, 0x96, 0x01, 0xc2, 0x3e, 0x02, 0x68, 0x69, 0xc9, 0x3e, 1, 2, 3, 4, 5, 6, 7, 8,
  ]);
  return fromBinary(schema, Buffer.concat([bytes, extra]));
}
