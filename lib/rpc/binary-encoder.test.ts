import { create, type DescMessage, toBinary } from "@bufbuild/protobuf";
import { StructSchema, TimestampSchema, timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { ListServersResponseSchema, ServerState, ServerStatus } from "../../gen/replay/servers/v1/servers_pb.js";
import { moreSchemas, ourSchemas, random, randomInit, testSchemas, withUnknownFields } from "./_samples.js";
import { encodeBinary, encodeCompiled } from "./binary-encoder.js";

/**
 * Bytes as expected: compared with Buffer.equals first, and through expect only when they differ
 * (its diff then), since tens of thousands of matching pairs through expect cost most of this file's time.
 */
function expectBytes(actual: Uint8Array, expected: Uint8Array, what: string): void {
  if (!Buffer.from(actual).equals(Buffer.from(expected)))
    expect(Buffer.from(actual), what).toEqual(Buffer.from(expected));
}

/** encodeBinary answers as toBinary does: the same bytes, or an error where toBinary throws one. */
function expectSameAsToBinary(schema: DescMessage, message: Parameters<typeof toBinary>[1], what: string) {
  let expected: Uint8Array;
  try {
    expected = toBinary(schema, message);
  } catch {
    expect(() => encodeBinary(schema, message), what).toThrow();
    return;
  }
  expectBytes(encodeBinary(schema, message), expected, what);
}

describe("encodeBinary", () => {
  it.each([...ourSchemas, ...moreSchemas].map((schema) => [schema.typeName, schema] as const))(
    "writes the bytes toBinary writes for random %s messages, unknown fields included",
    (_name, schema) => {
      for (let seed = 1; seed <= 300; seed++) {
        const r = random(seed);
        const message = create(schema, randomInit(schema, r) as never);
        expectSameAsToBinary(schema, message, `seed ${seed}`);
        // Every message of proto/ takes the fast path, whatever its values, and so does the plain
        // init object it was created from.
        if (ourSchemas.includes(schema) || schema === testSchemas.all) {
          const expected = Buffer.from(toBinary(schema, message));
          expectBytes(encodeCompiled(schema, message) ?? new Uint8Array(), expected, `seed ${seed}, compiled`);
          const init = randomInit(schema, random(seed));
          expectBytes(encodeCompiled(schema, init as never) ?? new Uint8Array(), expected, `seed ${seed}, init`);
        }
        // Unknown fields come from decoding: bytes only, so a message toBinary refuses (a proto2
        // required field unset) is left out here.
        const bytes = (() => {
          try {
            return toBinary(schema, message);
          } catch {
            return undefined;
          }
        })();
        if (bytes) expectSameAsToBinary(schema, withUnknownFields(schema, bytes), `seed ${seed} with unknown fields`);
      }
    },
  );

  it("writes the bytes toBinary writes for a servers list as the service builds it", () => {
    const now = new Date("2026-01-02T03:04:05.678Z");
    const response = create(ListServersResponseSchema, {
      servers: Array.from({ length: 20 }, (_, i) => ({
        serverId: crypto.randomUUID(),
        name: `bench-server-${i}`,
        status: i % 2 ? ServerStatus.ONLINE : ServerStatus.OFFLINE,
        lastSeenAt: i % 4 === 0 ? undefined : timestampFromDate(now),
        pluginVersion: i % 3 === 0 ? undefined : "2.4.1",
        replayCount: BigInt(i * 1000),
        categoryId: i % 5 === 0 ? crypto.randomUUID() : "",
        state: i % 7 === 0 ? ServerState.DEAUTHORISED : ServerState.CONNECTED,
      })),
    });
    expect(Buffer.from(encodeBinary(ListServersResponseSchema, response))).toEqual(
      Buffer.from(toBinary(ListServersResponseSchema, response)),
    );
  });

  it("leaves a schema it does not cover to toBinary", () => {
    const message = create(testSchemas.intKeys, { ikeys: { 1: "a", [-2]: "b" } } as never);
    expect(encodeCompiled(testSchemas.intKeys, message)).toBeUndefined();
    expectSameAsToBinary(testSchemas.intKeys, message, "int32 map keys");
  });

  it("leaves values outside its fast path to toBinary, which writes them or throws", () => {
    const fraction = create(TimestampSchema, { nanos: 1.5 });
    expect(() => toBinary(TimestampSchema, fraction)).toThrow();
    expect(() => encodeBinary(TimestampSchema, fraction)).toThrow();
    // A number where a string belongs: toBinary writes its decimal text.
    const numberValue = create(ValueSchema, { kind: { case: "numberValue", value: 1 } });
    const struct = create(StructSchema, {
      fields: { a: numberValue, b: { ...numberValue, kind: { case: "stringValue", value: 7 as never } } },
    });
    expectSameAsToBinary(StructSchema, struct, "a number in a string field");
  });
});
