import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FRAME, headersFrames, RawH2Client, SETTING, windowUpdateFrame } from "../../test/h2-frames.js";
import { pollUntil } from "../../test/poll.js";
import { H2_LIMITS } from "./h2-limits.js";
import { createDualListener, type DualListener } from "./listener.js";

// A stalled HTTP/2 reader : a client that asks for responses and never opens
// its receive window held them all, for good. The listener's session guard cuts a session that
// owes data and has read too little of it for `stallTimeoutMs` (short here), and leaves alone a
// long-lived stream between its messages and an idle connection.

const STALL_MS = 1_500;
const BODY = Buffer.alloc(256 * 1024, "m");

let listener: DualListener;
let port: number;

beforeAll(async () => {
  listener = createDualListener(
    (req, res) => {
      if (req.url === "/big") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end(BODY);
        return;
      }
      res.writeHead(404);
      res.end();
    },
    (stream, headers) => {
      if (headers[":path"] !== "/watch") return false;
      // A Health/Watch-like stream: a small message now and then, never done.
      stream.respond({ ":status": 200, "content-type": "application/grpc" });
      const tick = setInterval(() => stream.write(Buffer.alloc(10)), 200);
      stream.once("close", () => clearInterval(tick));
      stream.on("error", () => {});
      return true;
    },
    { ...H2_LIMITS, stallTimeoutMs: STALL_MS, checkIntervalMs: 200 },
  );
  await new Promise<void>((resolve) => listener.server.listen(0, "127.0.0.1", resolve));
  port = (listener.server.address() as AddressInfo).port;
});
afterAll(() => listener.close(0));

const get = (path: string) => ({ ":method": "GET", ":scheme": "http", ":path": path, ":authority": "localhost" });

describe("a stalled HTTP/2 reader", () => {
  it("is cut when it holds a zero window with responses owed", async () => {
    const client = await RawH2Client.connect(port, { [SETTING.INITIAL_WINDOW_SIZE]: 0 });
    try {
      await client.serverSettings();
      const ids = Array.from({ length: 50 }, (_, i) => 1 + 2 * i);
      await client.write(Buffer.concat(ids.map((id) => headersFrames(id, get("/big"), true))));
      // Every response began (HEADERS), none can send a byte of its body; past the session's
      // memory (maxSessionMemory) further streams are refused with ENHANCE_YOUR_CALM.
      await pollUntil(
        async () => client.frames.filter((f) => f.type === FRAME.HEADERS || f.type === FRAME.RST_STREAM).length,
        (n) => n === ids.length,
        10_000,
      );
      const answered = client.frames.filter((f) => f.type === FRAME.HEADERS).length;
      expect(answered * BODY.length).toBeLessThanOrEqual(2 * H2_LIMITS.maxSessionMemory * 1024 * 1024);
      const started = performance.now();
      expect(await client.waitClosed(STALL_MS + 10_000)).toBe(true);
      expect(performance.now() - started).toBeGreaterThanOrEqual(STALL_MS - 300);
      expect(client.goaway()?.code).toBe(0xb);
    } finally {
      client.close();
    }
  });

  it("keeps a connection idle with no stream, and a long-lived stream between its messages", async () => {
    const idle = await RawH2Client.connect(port);
    const watcher = await RawH2Client.connect(port, { [SETTING.INITIAL_WINDOW_SIZE]: 1 << 20 });
    try {
      await idle.serverSettings();
      await watcher.serverSettings();
      await watcher.write(headersFrames(1, get("/watch"), false));
      // Several stall periods pass; the watcher reads its messages (its window is open).
      await pollUntil(
        async () => watcher.received.get(1) ?? 0,
        (bytes) => bytes >= 10 * Math.ceil((3 * STALL_MS) / 200) - 20,
        20_000,
      );
      expect(idle.closed).toBe(false);
      expect(watcher.closed).toBe(false);
    } finally {
      idle.close();
      watcher.close();
    }
  });
});

describe("a reader that reads slowly but steadily", () => {
  it("is not cut", async () => {
    const client = await RawH2Client.connect(port, { [SETTING.INITIAL_WINDOW_SIZE]: 0 });
    try {
      await client.serverSettings();
      await client.write(headersFrames(1, get("/big"), true));
      // 32 KiB every 400 ms: the 256 KiB body takes over three seconds, two stall periods.
      while (!client.closed && (client.received.get(1) ?? 0) < BODY.length) {
        await client.write(Buffer.concat([windowUpdateFrame(0, 32 * 1024), windowUpdateFrame(1, 32 * 1024)]));
        await new Promise((resolve) => setTimeout(resolve, 400));
      }
      expect(client.closed).toBe(false);
      expect(client.received.get(1)).toBe(BODY.length);
    } finally {
      client.close();
    }
  });
});
