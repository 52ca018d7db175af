import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseDurationList } from "./config.js";

describe("loadConfig", () => {
  it("applies operations.md's defaults: embedded mode, ports 8080/8081, delivery on, the Standard Webhooks schedule", () => {
    const config = loadConfig({});
    expect(config.mode).toBe("embedded");
    expect(config.http.port).toBe(8080);
    expect(config.http.internalPort).toBe(8081);
    expect(config.db.dataDir).toBe("./.data");
    expect(config.db.template).toMatch(/\/node_modules\/\.cache\/replay-service$/);
    expect(config.webhooks.delivery).toBe(true);
    expect(config.webhooks.timeoutMs).toBe(15_000);
    expect(config.webhooks.retryScheduleMs).toEqual([
      0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000,
    ]);
    expect(config.gateway.replicas).toBe(1);
    expect(config.log.level).toBe("info");
  });

  it("takes the embedded initdb template from EMBEDDED_TEMPLATE_DIR, or none when it is off", () => {
    expect(loadConfig({ EMBEDDED_TEMPLATE_DIR: "/var/cache/replay" }).db.template).toBe("/var/cache/replay");
    expect(loadConfig({ EMBEDDED_TEMPLATE_DIR: "off" }).db.template).toBeUndefined();
  });

  it("exports spans only when an OTLP endpoint is set, to its /v1/traces, with the collector's headers", () => {
    expect(loadConfig({}).otel).toEqual({ otlpUrl: undefined, headers: {}, batchDelayMs: 5_000 });
    const on = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector:4318/",
      OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=a%3Db, Tenant = t1",
      OTEL_BSP_SCHEDULE_DELAY: "250",
    }).otel;
    expect(on).toEqual({
      otlpUrl: "https://collector:4318/v1/traces",
      headers: { "x-api-key": "a=b", tenant: "t1" },
      batchDelayMs: 250,
    });
    expect(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/custom" }).otel.otlpUrl).toBe(
      "http://c:4318/custom",
    );
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: "novalue" })).toThrow(/OTEL_EXPORTER_OTLP_HEADERS/);
  });

  it("runs the distributed mode when DATABASE_URL is set", () => {
    const config = loadConfig({ DATABASE_URL: "postgres://db/x", NATS_URL: "nats://n:4222" });
    expect(config.mode).toBe("distributed");
    expect(config.bus.natsUrl).toBe("nats://n:4222");
  });

  it("gives each service its own default port and the gateway the service URLs", () => {
    const env = { DATABASE_URL: "postgres://db/x", NATS_URL: "nats://n:4222" };
    expect(loadConfig(env, "servers").http.port).toBe(9092);
    expect(loadConfig({ ...env, PORT: "9090" }, "servers").http.port).toBe(9090);
    expect(
      loadConfig({ ...env, SECRETS_KEY: "k".repeat(44), SERVERS_URL: "http://servers:9090" }, "gateway").serviceUrls
        .servers,
    ).toBe("http://servers:9090");
  });

  it("refuses to start the processes that keep secrets without SECRETS_KEY, in one line; the others and the embedded mode need none", () => {
    const env = { DATABASE_URL: "postgres://db/x", NATS_URL: "nats://n:4222" };
    for (const name of ["gateway", "webhooks"] as const) {
      expect(() => loadConfig(env, name)).toThrow(
        new RegExp(
          `^invalid configuration: SECRETS_KEY \\(or SECRETS_KEY_FILE\\) is required by the ${name} process[^\\n]*$`,
        ),
      );
      expect(loadConfig({ ...env, SECRETS_KEY_FILE: "/run/key" }, name).secrets.keyFile).toBe("/run/key");
    }
    expect(loadConfig(env, "markers").secrets.key).toBeUndefined();
    expect(loadConfig({}).secrets.key).toBeUndefined();
  });

  it("gives the embedded mode's services fixed ports, 9091-9094 as the distributed defaults, each settable (0: any free port)", () => {
    expect(loadConfig({}).http.servicePorts).toEqual({ markers: 9091, servers: 9092, replays: 9093, webhooks: 9094 });
    expect(loadConfig({ SERVERS_PORT: "7000", MARKERS_PORT: "0" }).http.servicePorts).toMatchObject({
      markers: 0,
      servers: 7000,
    });
    expect(() => loadConfig({ WEBHOOKS_PORT: "65536" })).toThrow(
      /WEBHOOKS_PORT must be a whole number from 0 to 65535, got "65536"/,
    );
  });

  it("reports every bad value at once, one line each", () => {
    const bad = {
      PORT: "eighty",
      INTERNAL_PORT: "70000",
      DATABASE_URL: "mysql://x",
      WEBHOOK_DELIVERY: "maybe",
      WEBHOOK_RETRY_SCHEDULE: "0,5q",
      WEBHOOK_ALLOW_TARGETS: "127.0.0.1",
      GATEWAY_REPLICAS: "0",
      LOG_LEVEL: "loud",
    };
    let error: unknown;
    try {
      loadConfig(bad);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of Object.keys(bad)) expect(message).toContain(name);
    expect(message.split("\n  - ")).toHaveLength(Object.keys(bad).length + 1);
  });

  it("refuses to run one process of the distributed deployment without Postgres and NATS", () => {
    expect(() => loadConfig({}, "markers")).toThrow(/DATABASE_URL must be set[\s\S]*NATS_URL must be set/);
  });

  it("keeps events 7 days and inbox ids 8 days by default, and never the inbox shorter than the events", () => {
    const defaults = loadConfig({});
    expect(defaults.events).toEqual({ retentionMs: 7 * 86_400_000, inboxRetentionMs: 8 * 86_400_000 });
    expect(loadConfig({ EVENT_RETENTION: "36h", INBOX_RETENTION: "2d" }).events).toEqual({
      retentionMs: 36 * 3_600_000,
      inboxRetentionMs: 2 * 86_400_000,
    });
    expect(() => loadConfig({ EVENT_RETENTION: "9d" })).toThrow(/INBOX_RETENTION must not be shorter/);
    expect(() => loadConfig({ EVENT_RETENTION: "10s" })).toThrow(/EVENT_RETENTION must be one duration/);
    expect(() => loadConfig({ INBOX_RETENTION: "1d,2d" })).toThrow(/INBOX_RETENTION must be one duration/);
  });

  it("keeps an ended webhook delivery in the log 30 days by default, never less than a minute", () => {
    expect(loadConfig({}).webhooks.logRetentionMs).toBe(30 * 86_400_000);
    expect(loadConfig({ WEBHOOK_LOG_RETENTION: "36h" }).webhooks.logRetentionMs).toBe(36 * 3_600_000);
    for (const bad of ["30s", "7d,30d", "a month"]) {
      expect(() => loadConfig({ WEBHOOK_LOG_RETENTION: bad }), bad).toThrow(
        /WEBHOOK_LOG_RETENTION must be one duration/,
      );
    }
  });

  it("refuses real Postgres without NATS: the in-process bus relies on the embedded database's commit order", () => {
    expect(() => loadConfig({ DATABASE_URL: "postgres://db/x" })).toThrow(/NATS_URL must be set with DATABASE_URL/);
  });

  it("takes BLOB_URL as file:///dir or s3://bucket?…, and refuses anything else", () => {
    expect(loadConfig({}).blob.url).toBeUndefined();
    expect(loadConfig({ BLOB_URL: "file:///var/lib/replay/blobs" }).blob.url).toBe("file:///var/lib/replay/blobs");
    const s3 = "s3://replay-archives?region=eu-west-1&endpoint=http://minio:9000&forcePathStyle=true";
    expect(loadConfig({ BLOB_URL: s3 }).blob.url).toBe(s3);
    for (const bad of ["./blobs", "file://host/dir", "s3://", "s3://b/with/path", "https://bucket.s3.amazonaws.com"]) {
      expect(() => loadConfig({ BLOB_URL: bad }), bad).toThrow(/BLOB_URL must be/);
    }
  });

  it("listens on loopback unless HOST (public port) or INTERNAL_HOST (admin API and services) widen it", () => {
    expect(loadConfig({}).http).toMatchObject({ host: "127.0.0.1", internalHost: "127.0.0.1" });
    expect(loadConfig({ HOST: "0.0.0.0" }).http).toMatchObject({ host: "0.0.0.0", internalHost: "127.0.0.1" });
    expect(loadConfig({ INTERNAL_HOST: "::", INTERNAL_TOKEN: "a".repeat(32) }).http).toMatchObject({
      host: "127.0.0.1",
      internalHost: "::",
    });
  });

  it("accepts INTERNAL_TOKEN_ACCEPTED beside the token while it is rotated, never alone", () => {
    const token = "a".repeat(32);
    const next = "b".repeat(32);
    expect(loadConfig({ INTERNAL_TOKEN: token }).internal).toEqual({ token, acceptedTokens: [token] });
    expect(loadConfig({ INTERNAL_TOKEN: token, INTERNAL_TOKEN_ACCEPTED: next }).internal).toEqual({
      token,
      acceptedTokens: [token, next],
    });
    expect(() => loadConfig({ INTERNAL_TOKEN_ACCEPTED: next })).toThrow(/set INTERNAL_TOKEN too/);
    expect(() => loadConfig({ INTERNAL_TOKEN: token, INTERNAL_TOKEN_ACCEPTED: "short" })).toThrow(
      /INTERNAL_TOKEN_ACCEPTED must be 32/,
    );
  });

  it("requires INTERNAL_TOKEN (or INTERNAL_TOKEN_FILE) when the internal listeners leave loopback", () => {
    const token = "a".repeat(32);
    expect(loadConfig({}).internal.token).toBeUndefined();
    expect(() => loadConfig({ INTERNAL_HOST: "0.0.0.0" })).toThrow(/INTERNAL_TOKEN .* must be set when INTERNAL_HOST/);
    expect(() => loadConfig({ INTERNAL_HOST: "::" })).toThrow(/INTERNAL_TOKEN/);
    expect(loadConfig({ INTERNAL_HOST: "127.0.0.2" }).internal.token).toBeUndefined();
    expect(loadConfig({ INTERNAL_HOST: "0.0.0.0", INTERNAL_TOKEN: token }).internal.token).toBe(token);
    // Set on loopback too, it is required there as well.
    expect(loadConfig({ INTERNAL_TOKEN: token }).internal.token).toBe(token);
    const files: Record<string, string> = { "/run/secrets/token": `${token}\n` };
    const readFile = (path: string) => {
      const text = files[path];
      if (text === undefined) throw new Error("ENOENT: no such file");
      return text;
    };
    expect(
      loadConfig({ INTERNAL_HOST: "0.0.0.0", INTERNAL_TOKEN_FILE: "/run/secrets/token" }, undefined, readFile),
    ).toMatchObject({ internal: { token } });
    expect(() => loadConfig({ INTERNAL_TOKEN_FILE: "/missing" }, undefined, readFile)).toThrow(
      /INTERNAL_TOKEN_FILE "\/missing" cannot be read/,
    );
    expect(() =>
      loadConfig({ INTERNAL_TOKEN: token, INTERNAL_TOKEN_FILE: "/run/secrets/token" }, undefined, readFile),
    ).toThrow(/not both/);
    expect(() => loadConfig({ INTERNAL_TOKEN: "short" })).toThrow(/32 to 4096 visible ASCII/);
    expect(() => loadConfig({ INTERNAL_TOKEN: `${token} x` })).toThrow(/visible ASCII/);
  });

  it("reads DATABASE_CA_FILE's certificates with DATABASE_URL, and refuses a file it cannot use", () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const files: Record<string, string> = { "/etc/replay/db-ca/ca.crt": pem, "/etc/replay/key": "k".repeat(32) };
    const readFile = (path: string) => {
      const text = files[path];
      if (text === undefined) throw new Error("ENOENT: no such file");
      return text;
    };
    const db = { DATABASE_URL: "postgres://db/replay", NATS_URL: "nats://nats:4222" };
    expect(loadConfig(db).db.ca).toBeUndefined();
    expect(loadConfig({ ...db, DATABASE_CA_FILE: "/etc/replay/db-ca/ca.crt" }, undefined, readFile).db.ca).toBe(pem);
    expect(() => loadConfig({ ...db, DATABASE_CA_FILE: "/missing" }, undefined, readFile)).toThrow(
      /DATABASE_CA_FILE "\/missing" cannot be read/,
    );
    expect(() => loadConfig({ ...db, DATABASE_CA_FILE: "/etc/replay/key" }, undefined, readFile)).toThrow(
      /holds no PEM certificate/,
    );
    expect(() => loadConfig({ DATABASE_CA_FILE: "/etc/replay/db-ca/ca.crt" }, undefined, readFile)).toThrow(
      /only read with DATABASE_URL/,
    );
  });

  it("stops with its parent only when an npm script started it", () => {
    expect(loadConfig({}).lifecycle.stopWithParent).toBe(false);
    expect(loadConfig({ npm_lifecycle_event: "start" }).lifecycle.stopWithParent).toBe(true);
  });

  it("returns a frozen object", () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config.webhooks.retryScheduleMs)).toBe(true);
    expect(Object.isFrozen(config.http)).toBe(true);
  });
});

describe("parseDurationList", () => {
  it.each([
    ["0,500ms,500ms", [0, 500, 500]],
    ["0, 5s ,1.5m", [0, 5000, 90_000]],
    ["2h", [7_200_000]],
    ["250", [250]],
  ])("parses %s", (text, expected) => {
    expect(parseDurationList(text)).toEqual(expected);
  });

  it.each(["", "5x", "-1s", "1,,2", "s"])("refuses %j", (text) => {
    expect(parseDurationList(text)).toBeUndefined();
  });
});
