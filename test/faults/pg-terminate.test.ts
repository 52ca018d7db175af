import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { describe, expect, it, onTestFinished } from "vitest";
import { RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { provisionTenant, type Res, send, sendSigned } from "../http.js";
import { pollUntil } from "../poll.js";
import { grpcCheckIn } from "../recorder.js";
import { distributedSkipReason, startDistributedSystem } from "../system.js";

// A Postgres failover or restart terminates every connection at once. Each process must
// live through it (a dropped connection under a transaction crashed 7 of 10 processes), a request
// that held a dropped connection is answered 503 SERVICE_UNAVAILABLE with Retry-After (never 500:
// authentication on a dropped connection was), and the system serves and publishes events again.

const TERMINATIONS = 3;
const IN_FLIGHT = 6;

describe.skipIf(distributedSkipReason())(
  "Postgres connections terminated under load (distributed mode; skipped without DATABASE_URL and NATS_URL)",
  () => {
    it("keeps every process alive, answers 503 and never 500, and serves and relays events afterwards", async () => {
      const sys = await startDistributedSystem();
      onTestFinished(() => sys.stop().then(() => undefined));
      const t = await provisionTenant(sys, { rateLimitRps: 10_000, rateLimitBurst: 10_000, serverLimit: 10_000n });
      // Keys seen for the first time: each bearer request's authentication reads the database.
      const keys: string[] = [];
      for (let i = 0; i < 150; i++) keys.push((await t.mintKey(["servers:read", "servers:write"])).key);

      const answers: Res[] = [];
      let stop = false;
      let n = 0;
      const worker = async () => {
        while (!stop) {
          const i = n++;
          const key = keys[i % keys.length] as string;
          const res =
            i % 3 === 0
              ? await send(sys.baseUrl, "POST", "/v1/api/servers", {
                  headers: { authorization: `Bearer ${key}` },
                  body: { name: `srv-${i}` },
                })
              : i % 3 === 1
                ? await send(sys.baseUrl, "GET", "/v1/api/servers?pageSize=5", {
                    headers: { authorization: `Bearer ${key}` },
                  })
                : await sendSigned(sys.baseUrl, t.signer, "GET", "/v1/webhooks");
          answers.push(res);
        }
      };
      const workers = Array.from({ length: IN_FLIGHT }, worker);

      const admin = new pg.Client({ connectionString: sys.databaseUrl });
      await admin.connect();
      // Ended before the system's database is dropped (WITH (FORCE) would terminate it too).
      let adminEnded: Promise<void> | undefined;
      const endAdmin = () => {
        adminEnded ??= admin.end();
        return adminEnded;
      };
      onTestFinished(endAdmin);
      let terminated = 0;
      for (let round = 0; round < TERMINATIONS; round++) {
        const before = answers.length;
        await pollUntil(
          async () => answers.length,
          (count) => count >= before + 30,
          30_000,
        );
        const { rowCount } = await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        );
        terminated += rowCount ?? 0;
      }
      const afterLast = answers.length;
      await pollUntil(
        async () => answers.length,
        (count) => count >= afterLast + 60,
        30_000,
      );
      stop = true;
      await Promise.all(workers);
      await endAdmin();

      // Every process had connections to lose (pools, relays, workers, listeners).
      expect(terminated).toBeGreaterThanOrEqual(TERMINATIONS * 5);
      const statuses = answers.map((r) => r.status);
      const unexpected = answers.filter((r) => ![200, 201, 503].includes(r.status));
      expect(unexpected.map((r) => `${r.status} ${r.text}`)).toEqual([]);
      for (const res of answers.filter((r) => r.status === 503)) {
        expect(res.body).toMatchObject({ code: "SERVICE_UNAVAILABLE" });
        expect(res.headers.get("retry-after")).toBe("1");
      }
      // The last answers, after the last termination, are served.
      expect(
        statuses.slice(-20).every((s) => s === 200 || s === 201),
        statuses.slice(-20).join(","),
      ).toBe(true);

      // Events still flow: a server created now reaches the replays service's projection (the
      // servers relay published it, replays consumed it), so a recording can start on it.
      const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: "after" },
      });
      expect(created.status, created.text).toBe(201);
      const serverId: string = created.body.serverId;
      await grpcCheckIn(sys.internalUrl, serverId);
      const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
      await pollUntil(
        () => recording.startRecording({ serverId }).catch((err) => ConnectError.from(err)),
        (r) => !(r instanceof ConnectError),
        30_000,
      );

      // No process died: each exits 0 on SIGTERM (one that crashed reports its exit code, 1).
      expect(await sys.stop(), sys.output().slice(-4000)).toEqual([0, 0, 0, 0, 0]);
    }, 180_000);
  },
);
