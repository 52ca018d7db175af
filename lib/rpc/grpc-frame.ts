import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";

export const PREFIX_BYTES = 5;

/**
 * The prefix is judged as soon as it arrives, so a 4 GiB length is refused without waiting for a byte more.
 * Anything but exactly one message is the caller's bytes: `invalid_argument`, never `internal`.
 */
export function readGrpcMessage(body: Readable, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // The message's length once the prefix is in; -1 before.
    let length = -1;
    const stop = (error: ConnectError) => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.resume();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      chunks.push(chunk);
      if (length < 0 && size >= PREFIX_BYTES) {
        const head = chunks.length === 1 ? chunk : Buffer.concat(chunks, size);
        const refused = refusePrefix(head[0] as number, head.readUInt32BE(1), maxBytes);
        if (refused) return stop(refused);
        length = head.readUInt32BE(1);
      }
      if (length >= 0 && size > PREFIX_BYTES + length) {
        stop(new ConnectError("a unary call carries exactly one message", Code.InvalidArgument));
      }
    };
    const onEnd = () => {
      if (size < PREFIX_BYTES || size < PREFIX_BYTES + length) {
        const promised = length < 0 ? "a 5-byte length prefix" : `${length} bytes after its prefix`;
        return reject(
          new ConnectError(
            `the request body ended after ${size} bytes, short of ${promised}: a unary call carries exactly one whole message`,
            Code.InvalidArgument,
          ),
        );
      }
      const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
      resolve(whole.subarray(PREFIX_BYTES));
    };
    body.on("data", onData);
    body.once("end", onEnd);
    body.once("error", () => reject(new ConnectError("the request body was cut short", Code.Canceled)));
  });
}

function refusePrefix(flags: number, length: number, maxBytes: number): ConnectError | undefined {
  if (flags === 1) {
    // The gRPC spec allows INTERNAL too, but the bytes are the caller's (docs/grpc-port.md).
    return new ConnectError("message flagged compressed without a grpc-encoding", Code.InvalidArgument);
  }
  if (flags !== 0) return new ConnectError(`invalid message flags ${flags}`, Code.InvalidArgument);
  if (length > maxBytes) {
    return new ConnectError(`message of ${length} bytes is larger than ${maxBytes}`, Code.ResourceExhausted);
  }
  return undefined;
}
