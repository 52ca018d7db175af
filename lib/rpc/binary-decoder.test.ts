import { isDeepStrictEqual } from "node:util";
import { create, type DescMessage, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { moreSchemas, ourSchemas, random, randomInit, testSchemas, withUnknownFields } from "./_samples.js";
import { decodeBinary, decodeCompiled } from "./binary-decoder.js";

/**
 * A message strictly equal to the expected one: node's isDeepStrictEqual first, and expect (for its
 * diff) only when that fails, since tens of thousands of matching pairs through expect cost most
 * of this file's time.
 */
function expectStrictlyEqual(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual, what).toStrictEqual(expected);
}

/** decodeBinary answers as fromBinary does: the same message, or an error where fromBinary throws one. */
function expectSameAsFromBinary(schema: DescMessage, bytes: Uint8Array, what: string): void {
  let expected: unknown;
  try {
    expected = fromBinary(schema, bytes);
  } catch {
    expect(() => decodeBinary(schema, bytes), what).toThrow();
    return;
  }
  expectStrictlyEqual(decodeBinary(schema, bytes), expected, what);
  // Every proto3 schema takes the fast path for whatever fromBinary reads.
  if (ourSchemas.includes(schema) || schema === testSchemas.all) {
    expectStrictlyEqual(decodeCompiled(schema, bytes), expected, `${what}, compiled`);
    // A Buffer, as every body off the wire is, takes the ASCII string path; bytes fields are then
    // Buffers, as fromBinary makes them from a Buffer.
    const buffer = Buffer.from(bytes);
    expectStrictlyEqual(decodeCompiled(schema, buffer), fromBinary(schema, buffer), `${what}, compiled from a Buffer`);
  }
}

function bytesOf(schema: DescMessage, seed: number): Uint8Array | undefined {
  try {
    return toBinary(schema, create(schema, randomInit(schema, random(seed)) as never));
  } catch {
    // A proto2 message with a required field unset: toBinary refuses it.
    return undefined;
  }
}

describe("decodeBinary", () => {
  it.each([...ourSchemas, ...moreSchemas].map((schema) => [schema.typeName, schema] as const))(
    "reads what fromBinary reads from random %s messages: unknown fields, repeated and merged fields, truncated bytes",
    (_name, schema) => {
      for (let seed = 1; seed <= 200; seed++) {
        const bytes = bytesOf(schema, seed);
        const other = bytesOf(schema, seed + 10_000);
        if (!bytes || !other) continue;
        expectSameAsFromBinary(schema, bytes, `seed ${seed}`);
        // Field 999, a varint of 1: one unknown field alone.
        expectSameAsFromBinary(schema, Buffer.concat([bytes, Uint8Array.from([0xb8, 0x3e, 0x01])]), `seed ${seed} +1`);
        const withUnknown = toBinary(schema, withUnknownFields(schema, bytes));
        expectSameAsFromBinary(schema, withUnknown, `seed ${seed} with unknown fields`);
        // Two messages back to back are one, merged: the last scalar wins, lists and maps add up,
        // messages merge, and a oneof takes the last case.
        expectSameAsFromBinary(schema, Buffer.concat([withUnknown, other, withUnknown]), `seed ${seed} merged`);
        if (bytes.length > 1)
          expectSameAsFromBinary(schema, bytes.subarray(0, bytes.length - 1), `seed ${seed} truncated`);
      }
    },
  );

  it("leaves bytes it does not read to fromBinary, which reads them or throws", () => {
    const schema = testSchemas.intKeys;
    const bytes = toBinary(schema, create(schema, { ikeys: { 1: "a", [-2]: "b" } } as never));
    expectSameAsFromBinary(schema, bytes, "int32 map keys");
    expect(() => decodeCompiled(schema, bytes)).toThrow();
    expectSameAsFromBinary(ourSchemas[0] as DescMessage, Uint8Array.from([0x0a, 0x05, 0x61]), "a string past the end");
    expectSameAsFromBinary(ourSchemas[0] as DescMessage, Uint8Array.from([0x00]), "field number 0");
  });
});
