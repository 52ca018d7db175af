import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { AssetState, RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { internalTokenInterceptor } from "../../lib/rpc/internal-token.js";
import { durationSeconds, fastRules } from "../fast-rules.js";
import { freePorts } from "../free-port.js";
import { provisionTenant, send, sendSigned } from "../http.js";
import { natsServer, natsServerBinary } from "../nats-server.js";
import { pollUntil, waitFor } from "../poll.js";
import { hasPrometheus, PROMETHEUS, PROMTOOL, type Prometheus, startPrometheus } from "../prometheus.js";
import { grpcCheckIn } from "../recorder.js";
import { distributedSkipReason, type System, startDistributedSystem } from "../system.js";
import { startWebhookReceiver, type WebhookReceiver, writeReceiverCertificate } from "../webhook-receiver.js";

// The alerts of deploy/monitoring/replay-rules.yml against the running distributed system: a real
// Prometheus scrapes its five processes as the ServiceMonitor does (its job names, the internal
// token as bearer) every second, with the rules' time divided by 60 (test/fast-rules.ts). Each
// fault below must fire its alerts and, once removed, resolve them; then every dashboard panel's
// query must answer series from that Prometheus.
//
// Not fired here, each for its reason (replay-rules*.test.yml tests their logic with promtool):
// - ReplayApiErrorBudgetBurnSlow, ReplayApiLatencyBudgetBurnSlow: their 6 h and 3 d windows last
//   6 and 72 minutes scaled; they fire after the burst of 5xx below but resolve minutes later.
// - ReplayWebhookSubscriptionDisabled: a subscription disabled for failing no longer counts as
//   failing, which ReplayWebhookSubscriptionsFailing needs for a minute (WEBHOOK_DISABLE_AFTER is
//   one setting), and its 1 h window would keep it firing a minute after.
// - ReplayConsumerRedeliveries: over one redelivery a second for 10 s takes a handler failing event
//   after event, a poison event no fault of a running system makes.
// - ReplayRetentionBehind: retention runs once a minute, and would have to fail for minutes.
// - ReplayProcessRestarting: three starts within 15 s (15 m scaled), a race on a busy machine.

const root = fileURLToPath(new URL("../..", import.meta.url));
const run = promisify(execFile);
if (!hasPrometheus() && process.env.CI) throw new Error(`CI needs ${PROMETHEUS} (apt-get install prometheus)`);
const binary = natsServerBinary();
const skip =
  distributedSkipReason() ??
  (hasPrometheus() ? undefined : `no ${PROMETHEUS}`) ??
  (binary ? undefined : "no nats-server binary to stop");

const FACTOR = 60;
const SCRAPE_S = 1;
const TOKEN = randomBytes(32).toString("hex");
const rules = fastRules(readFileSync(join(root, "deploy/monitoring/replay-rules.yml"), "utf8"), FACTOR, 3 * SCRAPE_S);
const forSeconds = new Map(
  rules.groups.flatMap((g) => g.rules).map((r) => [r.alert, r.for === undefined ? 0 : durationSeconds(r.for)]),
);
// A deadline for an alert that never comes, not a measure: the fast rules need seconds.
const ALERT_DEADLINE_MS = 120_000;

describe.skipIf(skip)(`alerts live, against a real Prometheus (distributed mode; ${skip ?? "stops processes"})`, () => {
  let dir: string;
  let nats: ReturnType<typeof natsServer>;
  let natsDown = false;
  let receiver: WebhookReceiver;
  let receiverPort: number;
  let sys: System;
  let prometheus: Prometheus;
  let tenant: Awaited<ReturnType<typeof provisionTenant>>;
  /** How long each alert took, printed at the end. */
  const figures: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "replay-alerts-live-"));
    writeReceiverCertificate(dir);
    const [natsPort, port] = (await freePorts(2)) as [number, number];
    receiverPort = port;
    // A NATS server of this test's own, so that stopping it harms no one else.
    await mkdir(join(dir, "nats"));
    nats = natsServer(binary as string, natsPort, join(dir, "nats"));
    await nats.start();
    receiver = await startWebhookReceiver({ port: receiverPort, certDir: dir });
    sys = await startDistributedSystem({
      natsUrl: nats.url,
      env: {
        INTERNAL_TOKEN: TOKEN,
        WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${receiverPort}`,
        WEBHOOK_CA_FILE: join(dir, "cert.pem"),
        // Retries every 2 s for five minutes: a failing receiver is retried throughout the test.
        WEBHOOK_RETRY_SCHEDULE: ["0", ...Array(150).fill("2s")].join(","),
        // A receiver that hangs holds its attempts for longer than the test runs.
        WEBHOOK_TIMEOUT_MS: "300000",
        // Below this Prometheus's 1 s scrape timeout: a process whose pool is exhausted still answers.
        METRICS_READ_DEADLINE_MS: "400",
      },
    });

    const rulesFile = join(dir, "rules.yml");
    await writeFile(rulesFile, stringify(rules));
    const { stdout } = await run(PROMTOOL, ["check", "rules", rulesFile]);
    expect(stdout).toContain("SUCCESS");
    const host = (url: string) => new URL(url).host;
    const services = sys.serviceUrls as Record<string, string>;
    prometheus = await startPrometheus({
      dir,
      // The ServiceMonitor's jobs are the Services' names (deploy/k8s), the gateway's internal one.
      jobs: {
        "replay-gateway-internal": [host(sys.internalUrl)],
        ...Object.fromEntries(
          ["markers", "servers", "replays", "webhooks"].map((name) => [
            `replay-${name}`,
            [host(services[name] as string)],
          ]),
        ),
      },
      ruleFiles: [rulesFile],
      token: TOKEN,
      intervalS: SCRAPE_S,
    });
    await everyTargetUp();
    tenant = await provisionTenant(sys, { rateLimitRps: 5000, rateLimitBurst: 5000, serverLimit: 500n });
  }, 240_000);

  afterAll(async () => {
    if (figures.length > 0) console.log(`alerts live:\n${figures.join("\n")}`);
    try {
      await receiver?.close();
      await prometheus?.stop();
      // The system's stop deletes its streams: NATS must be up for it.
      if (natsDown) await nats.start();
      await sys?.stop();
    } finally {
      await nats?.kill();
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  const everyTargetUp = () =>
    waitFor(
      "every process scraped",
      async () => {
        const targets = await prometheus.targets();
        return targets.length === 5 && targets.every((t) => t.health === "up");
      },
      60_000,
    );
  const query = (expr: string) => prometheus.query(expr);
  const show = (alertname: string, labels: Record<string, string>) =>
    `${alertname}${Object.keys(labels).length > 0 ? JSON.stringify(labels) : ""}`;
  const alertsOf = async (alertname: string, labels: Record<string, string>) =>
    (await prometheus.alerts()).filter((a) =>
      Object.entries({ alertname, ...labels }).every(([k, v]) => a.labels[k] === v),
    );

  /** Waits until the alert is neither pending nor firing, so that a fault starts from quiet. */
  const quiet = (alertname: string, labels: Record<string, string> = {}) =>
    waitFor(`${show(alertname, labels)} quiet`, async () => (await alertsOf(alertname, labels)).length === 0, 90_000);

  /** Waits until the alert fires; `since` is when its fault began (Date.now()). */
  async function fires(alertname: string, labels: Record<string, string>, since: number): Promise<void> {
    const alert = await pollUntil(
      async () => (await alertsOf(alertname, labels)).find((a) => a.state === "firing"),
      (found) => found !== undefined,
      ALERT_DEADLINE_MS,
      100,
    ).catch(async (err: Error) => {
      throw new Error(
        `${show(alertname, labels)} not firing: ${err.message}\n${JSON.stringify(await prometheus.alerts())}`,
      );
    });
    // Pending from activeAt, firing its `for:` later.
    const firingAt = Date.parse(alert?.activeAt ?? "") + (forSeconds.get(alertname) ?? 0) * 1000;
    figures.push(`${show(alertname, labels)} fired ${((firingAt - since) / 1000).toFixed(1)} s after its fault began`);
  }

  /** Waits until the alert no longer fires; `since` is when its fault was removed (Date.now()). */
  async function resolves(alertname: string, labels: Record<string, string>, since: number): Promise<void> {
    await waitFor(
      `${show(alertname, labels)} resolved`,
      async () => !(await alertsOf(alertname, labels)).some((a) => a.state === "firing"),
      ALERT_DEADLINE_MS,
    );
    figures.push(
      `${show(alertname, labels)} resolved ${((Date.now() - since) / 1000).toFixed(1)} s after its fault ended`,
    );
  }

  const recording = () =>
    createClient(
      RecordingService,
      createGrpcTransport({ baseUrl: sys.internalUrl, interceptors: [internalTokenInterceptor(TOKEN)] }),
    );

  const createServer = async () => {
    const res = await send(sys.baseUrl, "POST", "/v1/api/servers", {
      headers: tenant.bearer(),
      body: { name: `srv-${randomUUID().slice(0, 8)}` },
    });
    expect(res.status, res.text).toBe(201);
    return res.body.serverId as string;
  };

  /** A recording in progress on a new server. */
  async function newRecording(): Promise<string> {
    const serverId = await createServer();
    await grpcCheckIn(sys.internalUrl, serverId, { token: TOKEN });
    const started = await pollUntil(
      () =>
        recording()
          .startRecording({ serverId })
          .catch((err) => ConnectError.from(err)),
      (r) => !(r instanceof ConnectError),
      30_000,
      100,
    );
    return (started as { replayId: string }).replayId;
  }

  /** A recording's four webhook events: collection.finalized, asset.processing, asset.ready, collection.released. */
  async function webhookEvents(replayId: string): Promise<void> {
    const client = recording();
    await client.finishRecording({ replayId, sizeBytes: 10n, formatVersion: 1 });
    await client.setAssetState({ replayId, state: AssetState.PROCESSING });
    await client.setAssetState({ replayId, state: AssetState.READY });
    await client.releaseCollection({ replayId });
  }

  /**
   * `request` sent `concurrency` at a time, over and over until stop(), which counts the answers by
   * status.
   */
  function load(request: () => Promise<{ status: number }>, concurrency: number, spreadMs = 0) {
    let stopping = false;
    const statuses = new Map<number, number>();
    const loops = Array.from({ length: concurrency }, async (_, i) => {
      // Loops started over `spreadMs`: answers that each take as long come one after another.
      await new Promise((resolve) => setTimeout(resolve, (i * spreadMs) / concurrency));
      while (!stopping) {
        const { status } = await request().catch(() => ({ status: 0 }));
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    });
    return {
      async stop() {
        stopping = true;
        await Promise.all(loops);
        return statuses;
      },
    };
  }

  /** A replay with markers' projection of it, for the marker routes the 5xx burst below calls. */
  let replayId: string;

  it("fires ReplayTargetDown while the webhooks process is stopped with events arriving, and resolves it after the restart", async () => {
    replayId = await newRecording();
    const other = await newRecording();
    await quiet("ReplayTargetDown");
    const began = Date.now();
    await sys.kill("webhooks");
    // Events for its consumer while it is down. ReplayConsumerLag cannot see them: a consumer's lag
    // is served by its own process, and none is left to serve it.
    await webhookEvents(other);
    await fires("ReplayTargetDown", { job: "replay-webhooks" }, began);
    await sys.restart("webhooks");
    const ended = Date.now();
    await resolves("ReplayTargetDown", { job: "replay-webhooks" }, ended);
    await waitFor(
      "the webhooks consumer caught up",
      async () => (await query('replay_consumer_pending{durable="webhooks_replays"} == 0')).length === 1,
      60_000,
    );
  }, 240_000);

  it("fires ReplayOutboxLag while NATS is down and tenants are created, and resolves it once NATS is back", async () => {
    await quiet("ReplayOutboxLag");
    const began = Date.now();
    await nats.kill();
    natsDown = true;
    // Each tenant created is an event of the gateway's identity outbox that cannot be published.
    // The services' outboxes cannot be seen here: while NATS is down their /metrics wait the
    // JetStream API's 5 s for their consumers' lag, past this Prometheus's 1 s scrape timeout (a
    // production scrape waits 10 s), so their targets go down instead.
    for (let i = 0; i < 3; i++) await sys.admin.createTenant({ name: `while-nats-down-${i}` });
    await fires("ReplayOutboxLag", { schema: "identity" }, began);
    await nats.start();
    natsDown = false;
    const ended = Date.now();
    await resolves("ReplayOutboxLag", { schema: "identity" }, ended);
    await everyTargetUp();
  }, 240_000);

  describe("while one receiver answers 500 to every attempt and another hangs", () => {
    // The receivers fail from here to this block's last tests: their alerts need a minute of
    // failure (an hour scaled), and the faults of the tests between, which leave the webhooks
    // process alone, run meanwhile.
    let began: number;
    const subscriptions: string[] = [];

    beforeAll(async () => {
      await quiet("ReplayWebhookSubscriptionsFailing");
      await quiet("ReplayWebhookBacklog");
      const refusing = receiver.newPath();
      const hanging = receiver.newPath();
      receiver.behave(refusing, { status: 500 });
      receiver.behave(hanging, { hang: true });
      for (const [path, events] of [
        [refusing, ["collection.finalized"]],
        [hanging, ["collection.finalized", "asset.processing", "asset.ready", "collection.released"]],
      ] as const) {
        const res = await sendSigned(sys.baseUrl, tenant.signer, "POST", "/v1/webhooks", {
          body: { url: receiver.url(path), events },
        });
        expect(res.status, res.text).toBe(201);
        subscriptions.push(res.body.id);
      }
      const replays: string[] = [];
      for (let i = 0; i < 5; i++) replays.push(await newRecording());
      began = Date.now();
      // Twenty deliveries to the hanging receiver: sixteen hold its subscription's attempts in
      // flight (PER_SUBSCRIPTION_MAX), the others wait, due.
      for (const id of replays) await webhookEvents(id);
    }, 240_000);

    it("fires ReplayConsumerLag while the markers projections' inbox is locked, and resolves it once released", async () => {
      await quiet("ReplayConsumerLag");
      const db = new pg.Client({ connectionString: sys.databaseUrl });
      await db.connect();
      try {
        await db.query("BEGIN");
        // SHARE: reads go on (the inbox's retention gauge), inserts wait: every event a markers
        // consumer takes waits in its transaction, as behind a long lock or a slow disk.
        await db.query("LOCK TABLE markers.inbox IN SHARE MODE");
        const lagging = Date.now();
        // Each server created is a servers.server.created event for the markers_servers consumer.
        for (let i = 0; i < 30; i++) await createServer();
        await fires("ReplayConsumerLag", { durable: "markers_servers" }, lagging);
        // The waiting transactions lose their connections: NATS hands their events over again
        // once the consumer takes more (after the lock), and each counts as a redelivery.
        await pollUntil(
          async () =>
            (
              await db.query(
                `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%markers.inbox%'`,
              )
            ).rowCount,
          (n) => (n ?? 0) > 0,
          30_000,
          200,
        );
        await db.query("ROLLBACK");
        const released = Date.now();
        await resolves("ReplayConsumerLag", { durable: "markers_servers" }, released);
        await waitFor(
          "a redelivery counted",
          async () => (await query('replay_consumer_redeliveries_total{durable=~"markers_servers.*"}')).length > 0,
          60_000,
        );
      } finally {
        await db.end();
      }
    }, 240_000);

    it("fires the budget burns and ReplayTargetDown while markers is stalled, ReplayApiServerErrors while its table is gone, and resolves them", async () => {
      const route = "/v1/api/replays/:id/timeline-events";
      const list = () =>
        send(sys.baseUrl, "GET", `/v1/api/replays/${replayId}/timeline-events`, { headers: tenant.bearer() });
      expect((await list()).status).toBe(200);
      for (const alertname of ["ReplayApiErrorBudgetBurn", "ReplayApiLatencyBudgetBurn", "ReplayApiServerErrors"])
        await quiet(alertname);
      await quiet("ReplayTargetDown");

      // A stalled service: each request waits for the gateway's 10 s deadline, then answers 503.
      const stalled = Date.now();
      sys.stall("markers", true);
      const slow = load(list, 16, 10_000);
      await fires("ReplayApiErrorBudgetBurn", {}, stalled);
      await fires("ReplayApiLatencyBudgetBurn", {}, stalled);
      await fires("ReplayTargetDown", { job: "replay-markers" }, stalled);
      // 503 is an outage the burn alerts watch, not a bug: the alert for bugs is not even pending.
      expect(await alertsOf("ReplayApiServerErrors", {})).toEqual([]);
      sys.stall("markers", false);
      const resumed = Date.now();
      expect((await slow.stop()).get(503)).toBeGreaterThan(0);
      await resolves("ReplayTargetDown", { job: "replay-markers" }, resumed);

      // The markers table renamed under the running service, as a migration of another release
      // could leave it: each list fails inside the service and answers 500 INTERNAL_ERROR.
      const db = new pg.Client({ connectionString: sys.databaseUrl });
      await db.connect();
      try {
        await db.query("ALTER TABLE markers.marker RENAME TO marker_gone");
        const broken = Date.now();
        const failing = load(list, 2);
        await fires("ReplayApiServerErrors", { route }, broken);
        await db.query("ALTER TABLE markers.marker_gone RENAME TO marker");
        expect((await failing.stop()).get(500)).toBeGreaterThan(0);
      } finally {
        await db.end();
      }
      const repaired = Date.now();
      expect((await list()).status).toBe(200);
      await resolves("ReplayApiServerErrors", { route }, repaired);
      await resolves("ReplayApiErrorBudgetBurn", {}, repaired);
      await resolves("ReplayApiLatencyBudgetBurn", {}, resumed);
    }, 240_000);

    it("fires ReplayDatabasePoolExhausted while every markers connection waits on a lock, and resolves it once released", async () => {
      const list = () =>
        send(sys.baseUrl, "GET", `/v1/api/replays/${replayId}/timeline-events`, { headers: tenant.bearer() });
      await quiet("ReplayDatabasePoolExhausted");
      const db = new pg.Client({ connectionString: sys.databaseUrl });
      await db.connect();
      try {
        await db.query("BEGIN");
        // Every list waits for the lock on a connection of its own: more lists than the pool has.
        await db.query("LOCK TABLE markers.marker IN ACCESS EXCLUSIVE MODE");
        const locked = Date.now();
        const waiting = load(list, 24);
        await fires("ReplayDatabasePoolExhausted", { job: "replay-markers", schema: "markers" }, locked);
        await db.query("ROLLBACK");
        const released = Date.now();
        await waiting.stop();
        await resolves("ReplayDatabasePoolExhausted", { job: "replay-markers", schema: "markers" }, released);
      } finally {
        await db.end();
      }
    }, 240_000);

    it("fires ReplayWebhookSubscriptionsFailing and ReplayWebhookBacklog while the receivers fail, and resolves them once they answer", async () => {
      await fires("ReplayWebhookSubscriptionsFailing", {}, began);
      await fires("ReplayWebhookBacklog", {}, began);
      // The receivers come back, restarted on the same port: the hung attempts' connections are
      // cut, and every attempt after is answered 200.
      await receiver.close();
      receiver = await startWebhookReceiver({ port: receiverPort, certDir: dir });
      const answering = Date.now();
      await resolves("ReplayWebhookBacklog", {}, answering);
      await resolves("ReplayWebhookSubscriptionsFailing", {}, answering);
      await waitFor(
        "no subscription failing",
        async () => (await query('max(replay_webhook_subscriptions{state="failing"}) == 0')).length === 1,
        60_000,
      );
    }, 240_000);

    it("answers every dashboard panel's query with series", async () => {
      // A subscription its tenant disabled: the panel of disabled subscriptions counts it.
      const res = await sendSigned(sys.baseUrl, tenant.signer, "PATCH", `/v1/webhooks/${subscriptions[0]}`, {
        body: { disabled: true },
      });
      expect(res.status, res.text).toBe(200);
      const dashboard = JSON.parse(readFileSync(join(root, "deploy/monitoring/grafana-dashboard.json"), "utf8")) as {
        panels: { title: string; targets?: { expr: string }[] }[];
      };
      const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
      expect(queries.length).toBeGreaterThanOrEqual(20);
      // Grafana's $__rate_interval is four scrape intervals at least.
      const rateInterval = `${4 * SCRAPE_S}s`;
      const empty = async () => {
        const answers = await Promise.all(
          queries.map(async (q) => ({
            ...q,
            series: await query(q.expr.replaceAll("$__rate_interval", rateInterval)),
          })),
        );
        return answers.filter((a) => a.series.length === 0).map((a) => `${a.panel}: ${a.expr}`);
      };
      // The last answer, listing the queries still empty, when some stay empty.
      const left = await pollUntil(empty, (names) => names.length === 0, 30_000, 1000).catch(
        (err: Error) => err.message,
      );
      expect(left).toEqual([]);
    }, 120_000);
  });
});
