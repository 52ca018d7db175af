import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createReplayClient } from "@replay/client";
import { describe, expect, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { provisionTenant } from "./http.js";
import { recordingOnNewServer } from "./recorder.js";
import { oneSharedSystem } from "./shared-system.js";

// The client package's paging iterator (client.replays.list) over replays recorded through the
// internal API, by both schemes: every replay once, newest first, pages of five.

const SERVERS = 2;
const PER_SERVER = 11;
const REPLAYS = SERVERS * PER_SERVER;

describe.each(oneSharedSystem())("the client package's paging over $mode mode", (sys) => {
  it(`walks ${REPLAYS} replays page by page, each once, newest first, signed and with the key`, async () => {
    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000 });
    const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
    const recorded: string[] = [];
    // A server records one replay at a time (start, finish, again): four servers record side by side.
    await Promise.all(
      Array.from({ length: SERVERS }, async (_, n) => {
        const first = await recordingOnNewServer(sys, t.bearer(), `pages-${n}`);
        await recording.finishRecording({ replayId: first.replayId });
        recorded.push(first.replayId);
        for (let i = 1; i < PER_SERVER; i++) {
          const { replayId } = await recording.startRecording({ serverId: first.serverId });
          await recording.finishRecording({ replayId });
          recorded.push(replayId);
        }
      }),
    );

    const signed = createReplayClient({ baseUrl: sys.baseUrl, signingKey: t.signer });
    const byKey = createReplayClient({ baseUrl: sys.baseUrl, apiKey: t.key });
    const pages: number[] = [];
    signed.use({
      onResponse({ response }) {
        pages.push(response.status);
      },
    });
    for (const client of [signed, byKey]) {
      const seen: Array<{ id: string; started_at: string | null }> = [];
      for await (const replay of client.replays.list({ page_size: 5 })) seen.push(replay);
      expect(new Set(seen.map((r) => r.id))).toEqual(new Set(recorded));
      expect(seen).toHaveLength(REPLAYS);
      const startedAt = seen.map((r) => Date.parse(r.started_at ?? ""));
      expect(startedAt).toEqual([...startedAt].sort((a, b) => b - a));
    }
    // 22 at 5 a page: 5 pages, the last one short, and no empty page after it.
    expect(pages).toEqual(Array(Math.ceil(REPLAYS / 5)).fill(200));

    // Breaking out of the loop fetches no further page.
    pages.length = 0;
    for await (const _ of signed.replays.list({ page_size: 2 })) break;
    expect(pages).toHaveLength(1);
  });
});
