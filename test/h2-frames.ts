import net from "node:net";

/**
 * Raw HTTP/2 frames over a plain socket, for tests that must misbehave where node:http2's client
 * will not let them (reset storms, endless CONTINUATION, a receive window held at zero, header
 * blocks past the peer's limit). RFC 9113 §4 (framing) and RFC 7541 (HPACK, literals only).
 */

export const FRAME = {
  DATA: 0x0,
  HEADERS: 0x1,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;

export const SETTING = {
  HEADER_TABLE_SIZE: 0x1,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

export const ERROR = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

export type Frame = { type: number; flags: number; streamId: number; payload: Buffer };

export function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

export function settingsFrame(settings: Record<number, number> = {}): Buffer {
  const entries = Object.entries(settings);
  const payload = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(Number(id), i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FRAME.SETTINGS, 0, 0, payload);
}

export function rstStreamFrame(streamId: number, code: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(FRAME.RST_STREAM, 0, streamId, payload);
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment);
  return frame(FRAME.WINDOW_UPDATE, 0, streamId, payload);
}

/** An HPACK integer with an `prefixBits`-bit prefix (RFC 7541 §5.1), its first byte or-ed with `mask`. */
function hpackInteger(value: number, prefixBits: number, mask: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [mask | value];
  const bytes = [mask | max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return bytes;
}

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, "latin1");
  return Buffer.concat([Buffer.from(hpackInteger(bytes.length, 7, 0)), bytes]);
}

/** A header block of literals without indexing and without Huffman coding (RFC 7541 §6.2.2). */
export function headerBlock(headers: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(headers)) {
    parts.push(Buffer.from([0x00]), hpackString(name), hpackString(value));
  }
  return Buffer.concat(parts);
}

/** The request headers of a gRPC call to `path`. */
export function grpcRequestHeaders(path: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ":method": "POST",
    ":scheme": "http",
    ":path": path,
    ":authority": "localhost",
    "content-type": "application/grpc",
    te: "trailers",
    ...extra,
  };
}

/** HEADERS (split into CONTINUATION frames of at most 16 KiB, the default frame size) for `streamId`. */
export function headersFrames(streamId: number, headers: Record<string, string>, endStream: boolean): Buffer {
  const block = headerBlock(headers);
  const max = 16_384;
  const frames: Buffer[] = [];
  for (let offset = 0; offset === 0 || offset < block.length; offset += max) {
    const chunk = block.subarray(offset, offset + max);
    const last = offset + max >= block.length;
    const type = offset === 0 ? FRAME.HEADERS : FRAME.CONTINUATION;
    const flags = (last ? FLAG.END_HEADERS : 0) | (offset === 0 && endStream ? FLAG.END_STREAM : 0);
    frames.push(frame(type, flags, streamId, chunk));
  }
  return Buffer.concat(frames);
}

/** A gRPC message (length-prefixed, uncompressed) in one DATA frame. */
export function grpcDataFrame(streamId: number, message: Uint8Array, endStream = true): Buffer {
  const body = Buffer.alloc(5 + message.byteLength);
  body.writeUInt32BE(message.byteLength, 1);
  body.set(message, 5);
  return frame(FRAME.DATA, endStream ? FLAG.END_STREAM : 0, streamId, body);
}

/**
 * A client connection speaking raw frames. It sends the preface and `settings`, acknowledges the
 * server's SETTINGS and PINGs (as every HTTP/2 stack does, even one that reads nothing else), and
 * records every frame the server sends; it never sends WINDOW_UPDATE on
 * its own, so a test decides how much the server may send.
 */
export class RawH2Client {
  readonly frames: Frame[] = [];
  /** Bytes of DATA received, per stream. */
  readonly received = new Map<number, number>();
  closed = false;
  private buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => {});
  }

  static async connect(port: number, settings: Record<number, number> = {}): Promise<RawH2Client> {
    const socket = net.connect(port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const client = new RawH2Client(socket);
    client.write(Buffer.concat([PREFACE, settingsFrame(settings)]));
    return client;
  }

  /**
   * Writes, unless the server has closed the connection; resolves once the bytes are handed to
   * the kernel, or when the connection closes (a server that stopped reading never drains it).
   */
  write(bytes: Buffer): Promise<void> {
    if (this.closed || this.socket.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      if (this.socket.write(bytes)) return resolve();
      const done = () => {
        this.socket.off("drain", done);
        this.socket.off("close", done);
        resolve();
      };
      this.socket.once("drain", done);
      this.socket.once("close", done);
    });
  }

  /** The first frame (since the start) matching `predicate`, or undefined when the connection closed or `timeoutMs` passed. */
  async waitFor(predicate: (frame: Frame) => boolean, timeoutMs: number): Promise<Frame | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find(predicate);
      if (found || this.closed || Date.now() > deadline) return found;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves when the server closed the connection, or after `timeoutMs` (false then). */
  async waitClosed(timeoutMs: number): Promise<boolean> {
    await this.waitFor(() => false, timeoutMs);
    return this.closed;
  }

  /** The server's first SETTINGS frame, as id -> value. */
  async serverSettings(timeoutMs = 10_000): Promise<Map<number, number>> {
    const settings = await this.waitFor((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0, timeoutMs);
    const values = new Map<number, number>();
    for (let i = 0; settings && i + 6 <= settings.payload.length; i += 6) {
      values.set(settings.payload.readUInt16BE(i), settings.payload.readUInt32BE(i + 2));
    }
    return values;
  }

  goaway(): { lastStreamId: number; code: number } | undefined {
    const f = this.frames.find((x) => x.type === FRAME.GOAWAY);
    return f && { lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) };
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    while (this.buffer.length >= 9) {
      const length = this.buffer.readUIntBE(0, 3);
      if (this.buffer.length < 9 + length) break;
      const f: Frame = {
        type: this.buffer[3] as number,
        flags: this.buffer[4] as number,
        streamId: this.buffer.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(this.buffer.subarray(9, 9 + length)),
      };
      this.buffer = this.buffer.subarray(9 + length);
      if (f.type === FRAME.DATA) {
        this.received.set(f.streamId, (this.received.get(f.streamId) ?? 0) + length);
        // Keep no DATA payloads: a test may receive megabytes.
        f.payload = Buffer.alloc(0);
      }
      this.frames.push(f);
      if (f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0) {
        void this.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
      }
      if (f.type === FRAME.PING && (f.flags & FLAG.ACK) === 0) {
        void this.write(frame(FRAME.PING, FLAG.ACK, 0, f.payload));
      }
    }
    this.wake();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
