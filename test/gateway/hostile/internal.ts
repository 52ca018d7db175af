import http2 from "node:http2";
import { create, type DescMessage, ScalarType, toBinary } from "@bufbuild/protobuf";
import { ServersService } from "../../../gen/replay/servers/v1/servers_pb.js";
import type { Prng } from "./prng.js";

// The internal variant of the hostile generator: random bodies to the servers service's unary RPCs
// over the Connect protocol (HTTP/2 cleartext), as any process on the internal network could send.

export type InternalCall = {
  /** What kind of body it is, for the record: random bytes, a broken message, JSON, or none. */
  kind: "bytes" | "broken" | "json" | "empty";
  procedure: string;
  contentType: string;
  headers: Record<string, string>;
  body: Buffer;
};

/** A Connect unary call to a random ServersService RPC with random bytes, or a real message broken. */
export function hostileInternalCall(prng: Prng, context: Record<string, string>): InternalCall {
  const method = prng.pick(ServersService.methods.filter((m) => m.methodKind === "unary"));
  const procedure = `/${ServersService.typeName}/${method.name}`;
  const headers = prng.chance(0.7) ? context : {};
  const kind = prng.int(4);
  if (kind === 0)
    return { kind: "bytes", procedure, contentType: "application/proto", headers, body: randomBytes(prng, 64) };
  if (kind === 1)
    return { kind: "broken", procedure, contentType: "application/proto", headers, body: broken(prng, method.input) };
  if (kind === 2) {
    const json = prng.pick(['{"name":1}', '{"serverId":"\\u0000"}', "{", "[]", '{"pageSize":-1}', '{"x":{}}']);
    return { kind: "json", procedure, contentType: "application/json", headers, body: Buffer.from(json) };
  }
  const contentType = prng.pick(["application/proto", "text/plain", ""]);
  return { kind: "empty", procedure, contentType, headers, body: Buffer.alloc(0) };
}

function randomBytes(prng: Prng, max: number): Buffer {
  return Buffer.from(Array.from({ length: prng.int(max + 1) }, () => prng.int(256)));
}

/** A valid encoding of `schema` with string fields set, then truncated or with bytes flipped. */
function broken(prng: Prng, schema: DescMessage): Buffer {
  const init: Record<string, unknown> = {};
  for (const field of schema.fields) {
    if (field.fieldKind === "scalar" && field.scalar === ScalarType.STRING)
      init[field.localName] = "x".repeat(prng.int(40));
  }
  const bytes = Buffer.from(toBinary(schema, create(schema, init)));
  if (bytes.length === 0) return randomBytes(prng, 16);
  if (prng.chance(0.5)) return bytes.subarray(0, prng.int(bytes.length));
  for (let i = 0; i < 1 + prng.int(3); i++) bytes[prng.int(bytes.length)] = prng.int(256);
  return bytes;
}

/** The Connect code of the answer ("ok" for a 200), or what went wrong on the wire. */
export function sendInternal(session: http2.ClientHttp2Session, call: InternalCall): Promise<string> {
  return new Promise((resolve) => {
    const stream = session.request({
      ":method": "POST",
      ":path": call.procedure,
      ...(call.contentType === "" ? {} : { "content-type": call.contentType }),
      ...call.headers,
    });
    stream.setTimeout(15_000, () => {
      stream.close();
      resolve("no answer within 15 s");
    });
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on("response", (headers) => {
      status = Number(headers[":status"]);
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", (err) => resolve(`stream error: ${err.message}`));
    stream.on("end", () => {
      if (status === 200) return resolve("ok");
      try {
        resolve(String(JSON.parse(Buffer.concat(chunks).toString("utf8")).code));
      } catch {
        resolve(`HTTP ${status}`);
      }
    });
    stream.end(call.body);
  });
}

export function connectInternal(baseUrl: string): http2.ClientHttp2Session {
  return http2.connect(baseUrl);
}
