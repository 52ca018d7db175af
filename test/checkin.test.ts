import { randomUUID } from "node:crypto";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { ServerStatus } from "../gen/replay/servers/v1/servers_pb.js";
import { provisionTenant, send } from "./http.js";
import { grpcRecorder } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";

// Recorder check-ins from a stock gRPC client, many at once on one connection, the way the servers
// service groups them into one statement per tick: each caller gets its own answer or
// its own error, in both run modes. Distributed: straight to the servers service; embedded: through
// the gateway's internal port, the only gRPC door of that mode.

describe.each(sharedSystems())("check-ins at once ($mode mode)", (sys) => {
  const url = sys.serviceUrls?.servers ?? sys.internalUrl;

  it("answers each of many concurrent check-ins on its own; refused ones fail alone with their own error", async () => {
    const t = await provisionTenant(sys, { serverLimit: 60n });
    const api = {
      post: (path: string, body: unknown) => send(sys.baseUrl, "POST", path, { headers: t.bearer(), body }),
      delete: (path: string) => send(sys.baseUrl, "DELETE", path, { headers: t.bearer() }),
      list: async () =>
        (await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() })).body.servers as {
          id: string;
          lastSeenAt: string;
          pluginVersion: string | null;
          state: string;
          status: string;
        }[],
    };
    const create = async (i: number) => {
      const res = await api.post("/v1/api/servers", { name: `burst-${i}` });
      expect(res.status, res.text).toBe(201);
      return res.body.serverId as string;
    };
    const ids = await Promise.all(Array.from({ length: 40 }, (_, i) => create(i)));
    const connected = ids.slice(0, 32);
    const [pending, pendingTwice] = ids.slice(32, 34) as [string, string];
    const deauthorised = ids.slice(34, 36);
    const purged = ids[36] as string;
    const recorder = grpcRecorder(url);
    try {
      await Promise.all(
        [...connected, ...deauthorised, purged].map((id) => recorder.checkIn(id, { pluginVersion: "0.9" })),
      );
      for (const id of deauthorised) expect((await api.delete(`/v1/api/servers/${id}`)).status).toBe(204);
      expect((await api.delete(`/v1/api/servers/permanent/${purged}`)).status).toBe(204);

      const base = Date.now();
      const ago = (s: number) => new Date(base - s * 1000);
      const [repeated, nul, ancient] = connected as [string, string, string];
      type Expected = "online" | { code: grpcStatus; details: string };
      const calls: { serverId: string; pluginVersion?: string; at?: Date; expected: Expected }[] = [
        ...connected.map((serverId, i) => ({
          serverId,
          pluginVersion: `1.${i}`,
          at: ago(i),
          expected: "online" as const,
        })),
        { serverId: repeated, pluginVersion: "2.0", at: ago(40), expected: "online" },
        { serverId: pending, pluginVersion: "3.0", at: ago(50), expected: "online" },
        { serverId: pendingTwice, pluginVersion: "3.1", at: ago(60), expected: "online" },
        { serverId: pendingTwice, pluginVersion: "3.1", at: ago(61), expected: "online" },
        ...deauthorised.map((serverId) => ({
          serverId,
          expected: { code: grpcStatus.FAILED_PRECONDITION, details: `server ${serverId} was deauthorised` },
        })),
        { serverId: purged, expected: { code: grpcStatus.NOT_FOUND, details: `no server ${purged}` } },
        ...[randomUUID(), randomUUID()].map((serverId) => ({
          serverId,
          expected: { code: grpcStatus.NOT_FOUND, details: `no server ${serverId}` },
        })),
        {
          serverId: "not-a-uuid",
          expected: { code: grpcStatus.INVALID_ARGUMENT, details: "server id must be a UUID" },
        },
        // Values Postgres would refuse are refused first: their own check-in fails; the others do not.
        {
          serverId: nul,
          pluginVersion: "bad\u0000",
          expected: { code: grpcStatus.INVALID_ARGUMENT, details: "plugin_version must not contain U+0000" },
        },
        {
          serverId: ancient,
          at: new Date(-8.6e15),
          expected: { code: grpcStatus.INVALID_ARGUMENT, details: "at must be a timestamp between" },
        },
      ];
      const outcomes = await Promise.allSettled(calls.map((c) => recorder.checkIn(c.serverId, c)));

      outcomes.forEach((outcome, i) => {
        const { serverId, at, expected } = calls[i] as (typeof calls)[number];
        if (expected === "online") {
          if (outcome.status === "rejected") throw new Error(`check-in ${i} failed: ${outcome.reason}`);
          const res = outcome.value;
          expect({ serverId: res.serverId, status: res.status }, `check-in ${i}`).toEqual({
            serverId,
            status: ServerStatus.ONLINE,
          });
          expect(res.lastSeenAt && timestampDate(res.lastSeenAt), `check-in ${i}`).toEqual(at);
        } else {
          expect(outcome.status, `check-in ${i}`).toBe("rejected");
          const err = (outcome as PromiseRejectedResult).reason as ServiceError;
          expect({ code: err.code, details: err.details }, `check-in ${i}`).toMatchObject({
            code: expected.code,
            details: expect.stringContaining(expected.details),
          });
        }
      });

      const entries = new Map((await api.list()).map((entry) => [entry.id, entry]));
      connected.forEach((id, i) => {
        if (id === repeated) return;
        expect(entries.get(id), `server ${i}`).toMatchObject({
          lastSeenAt: ago(i).toISOString(),
          pluginVersion: `1.${i}`,
          status: "online",
        });
      });
      // Two check-ins of one server in the same burst leave the row as one of them, applied last, does.
      expect([
        { lastSeenAt: ago(0).toISOString(), pluginVersion: "1.0" },
        { lastSeenAt: ago(40).toISOString(), pluginVersion: "2.0" },
      ]).toContainEqual({
        lastSeenAt: entries.get(repeated)?.lastSeenAt,
        pluginVersion: entries.get(repeated)?.pluginVersion,
      });
      expect(entries.get(pending)).toMatchObject({ state: "connected", lastSeenAt: ago(50).toISOString() });
      expect(entries.get(pendingTwice)).toMatchObject({ state: "connected", pluginVersion: "3.1" });
      for (const id of deauthorised)
        expect(entries.get(id)).toMatchObject({ state: "deauthorised", status: "offline", pluginVersion: "0.9" });
      expect(entries.has(purged)).toBe(false);
      const stillPending = await send(sys.baseUrl, "GET", "/v1/api/servers/pending", { headers: t.bearer() });
      expect(stillPending.body.pending.map((p: { serverId: string }) => p.serverId).sort()).toEqual(
        ids.slice(37).sort(),
      );
    } finally {
      recorder.close();
    }
  });
});
