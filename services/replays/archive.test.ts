import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { type UploadArchiveRequest, UploadArchiveRequestSchema } from "../../gen/replay/replays/v1/recording_pb.js";
import { ARCHIVE_MAX_BYTES, archiveChunks, archiveKeyOf, declaredSizeOf } from "./archive.js";

const message = (init: Parameters<typeof create<typeof UploadArchiveRequestSchema>>[1]) =>
  create(UploadArchiveRequestSchema, init);

async function* stream(...messages: UploadArchiveRequest[]) {
  yield* messages;
}

/** Reads the chunks until the end or the first refusal; resolves to the byte count and the refusal's code. */
async function drain(chunks: AsyncIterable<Uint8Array>): Promise<{ bytes: number; code?: string }> {
  let bytes = 0;
  try {
    for await (const chunk of chunks) bytes += chunk.length;
    return { bytes };
  } catch (err) {
    return { bytes, code: (err as { code?: string }).code };
  }
}

const later = () => Date.now() + 60_000;
/** The signal of a call whose client is still there. */
const open = () => new AbortController().signal;

describe("archive upload rules", () => {
  it("yields the header's chunk, then every later message's, in order", async () => {
    const header = message({ replayId: "r", chunk: Buffer.from("ab") });
    const rest = stream(message({ chunk: Buffer.from("cd") }), message({}), message({ chunk: Buffer.from("e") }));
    const seen: string[] = [];
    for await (const chunk of archiveChunks(header, rest, later(), open())) seen.push(Buffer.from(chunk).toString());
    expect(seen).toEqual(["ab", "cd", "e"]);
  });

  it("refuses a header field in a later message", async () => {
    const header = message({ replayId: "r" });
    for (const late of [{ replayId: "r" }, { formatVersion: 1 }, { endedAt: { seconds: 1n } }]) {
      expect(await drain(archiveChunks(header, stream(message(late)), later(), open()))).toEqual({
        bytes: 0,
        code: "INVALID_ARGUMENT",
      });
    }
  });

  it("refuses the chunk that passes 1 GiB, before it is stored", async () => {
    // One 4 MiB buffer sent over and over: only counted, never stored.
    const piece = Buffer.alloc(4 * 1024 * 1024);
    const count = ARCHIVE_MAX_BYTES / piece.length;
    async function* rest() {
      for (let i = 0; i <= count; i++) yield message({ chunk: piece });
    }
    expect(ARCHIVE_MAX_BYTES).toBe(1024 ** 3);
    expect(await drain(archiveChunks(message({ replayId: "r" }), rest(), later(), open()))).toEqual({
      bytes: ARCHIVE_MAX_BYTES,
      code: "PAYLOAD_TOO_LARGE",
    });
  });

  it("refuses a stream that ended because its caller went away: it is no archive", async () => {
    const gone = new AbortController();
    async function* rest() {
      yield message({ chunk: Buffer.from("cd") });
      // The client reset the stream: Node ends the request body as if it were whole.
      gone.abort();
    }
    expect(
      await drain(archiveChunks(message({ replayId: "r", chunk: Buffer.from("ab") }), rest(), later(), gone.signal)),
    ).toEqual({
      bytes: 4,
      code: 1, // Code.Canceled
    });
  });

  it("holds an archive to the size its first message declared: short or over is INVALID_ARGUMENT", async () => {
    const header = (sizeBytes: bigint) => message({ replayId: "r", chunk: Buffer.from("ab"), sizeBytes });
    const rest = () => stream(message({ chunk: Buffer.from("cd") }));
    expect(await drain(archiveChunks(header(4n), rest(), later(), open()))).toEqual({ bytes: 4 });
    // A recorder that gave up after "ab", its stream ended as if whole.
    expect(await drain(archiveChunks(header(4n), stream(), later(), open()))).toEqual({
      bytes: 2,
      code: "INVALID_ARGUMENT",
    });
    // The chunk that passes it is refused before it is stored.
    expect(await drain(archiveChunks(header(3n), rest(), later(), open()))).toEqual({
      bytes: 2,
      code: "INVALID_ARGUMENT",
    });
    // It belongs in the first message only.
    const late = stream(message({ chunk: Buffer.from("cd"), sizeBytes: 4n }));
    expect(await drain(archiveChunks(header(4n), late, later(), open()))).toEqual({
      bytes: 2,
      code: "INVALID_ARGUMENT",
    });
  });

  it("refuses a declared size that is negative or over 1 GiB before reading a byte", () => {
    expect(declaredSizeOf(message({ replayId: "r" }))).toBeUndefined();
    expect(declaredSizeOf(message({ replayId: "r", sizeBytes: 0n }))).toBe(0);
    const code = (sizeBytes: bigint) => {
      try {
        declaredSizeOf(message({ replayId: "r", sizeBytes }));
        return "OK";
      } catch (err) {
        return (err as { code?: string }).code;
      }
    };
    expect(code(-1n)).toBe("INVALID_ARGUMENT");
    expect(code(BigInt(ARCHIVE_MAX_BYTES))).toBe("OK");
    expect(code(BigInt(ARCHIVE_MAX_BYTES) + 1n)).toBe("PAYLOAD_TOO_LARGE");
  });

  it("gives up on an upload whose next message does not come before the deadline", async () => {
    const stalled = (async function* () {
      await new Promise(() => {});
      yield message({});
    })();
    const result = await drain(archiveChunks(message({ replayId: "r" }), stalled, Date.now() + 50, open()));
    expect(result.code).toBe(4); // Code.DeadlineExceeded
  });

  it("keys each upload apart under its tenant and replay", () => {
    expect(archiveKeyOf("t", "r", "u")).toBe("tenant/t/replay/r/u.rpl");
  });
});
