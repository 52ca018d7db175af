import { readFileSync } from "node:fs";
import { defaultTemplateDir } from "./db/embedded-template.js";
/** The only reader of process.env (spec/operations.md); loadConfig is pure so tests pass a literal. */
export const processNames = ["gateway", "markers", "servers", "replays", "webhooks"] as const;
export type ProcessName = (typeof processNames)[number];
export type ServiceName = Exclude<ProcessName, "gateway">;
export const serviceNames: readonly ServiceName[] = ["markers", "servers", "replays", "webhooks"];

/** Fixed defaults (a service process's PORT, the embedded services' `<NAME>_PORT`): clients need no log lines. */
export const defaultServicePorts: Record<ServiceName, number> = {
  markers: 9091,
  servers: 9092,
  replays: 9093,
  webhooks: 9094,
};

export type Config = Readonly<{
  /** Embedded: one process, embedded Postgres. Distributed: DATABASE_URL is set. */
  mode: "embedded" | "distributed";
  /** `host`: the public port; `internalHost`: the admin API and the services; both loopback by default. */
  http: Readonly<{
    port: number | undefined;
    internalPort: number;
    host: string;
    internalHost: string;
    servicePorts: Readonly<Record<ServiceName, number>>;
  }>;
  /**
   * `template`: the initdb template a new DATA_DIR is copied from (`off`: undefined). `ca`: with it, Postgres's
   * certificate and host name are checked against this CA (CloudNativePG signs with its own).
   */
  db: Readonly<{ url: string | undefined; ca: string | undefined; dataDir: string; template: string | undefined }>;
  /** `namespace` isolates deployments (test systems) sharing one NATS server. */
  bus: Readonly<{ natsUrl: string | undefined; namespace: string | undefined; streamReplicas: number }>;
  serviceUrls: Readonly<Record<ServiceName, string>>;
  /** `internalUrl`: where services look up what the gateway owns (tenants' plans). */
  gateway: Readonly<{ replicas: number; internalUrl: string }>;
  /** How long events stay replayable (streams' max age, published outbox rows) and consumers remember them. */
  events: Readonly<{ retentionMs: number; inboxRetentionMs: number }>;
  webhooks: Readonly<{
    delivery: boolean;
    allowTargets: readonly string[];
    caFile: string | undefined;
    timeoutMs: number;
    retryScheduleMs: readonly number[];
    /** How long an ended delivery stays in the delivery log, with its attempts (WEBHOOK_LOG_RETENTION). */
    logRetentionMs: number;
    /** A subscription failing throughout this long is disabled (WEBHOOK_DISABLE_AFTER); null: never (`off`). */
    disableAfterMs: number | null;
  }>;
  /** Where blobs (replay archives) live: `file:///dir` or `s3://bucket?…`; unset: DATA_DIR/blobs. */
  blob: Readonly<{ url: string | undefined }>;
  /** Unset: one generated into DATA_DIR. */
  pages: Readonly<{ tokenKey: string | undefined; tokenKeyFile: string | undefined }>;
  /** The key sealing secrets at rest, and the one being rotated out, which still opens but never seals. */
  secrets: Readonly<{
    key: string | undefined;
    keyFile: string | undefined;
    previousKey: string | undefined;
    previousKeyFile: string | undefined;
  }>;
  /**
   * The internal hop's shared secret, required beyond loopback. `acceptedTokens` adds, during a rotation, one
   * let in but never sent, so every process takes the new token before any sends it.
   */
  internal: Readonly<{ token: string | undefined; acceptedTokens: readonly string[] }>;
  log: Readonly<{ level: string }>;
  /** METRICS_READ_DEADLINE_MS: how long a scrape waits for one read (lib/metrics.ts); below the scrape timeout. */
  metrics: Readonly<{ readDeadlineMs: number }>;
  /** Span export (lib/otel.ts), on only when an OTLP endpoint is set. */
  otel: Readonly<{ otlpUrl: string | undefined; headers: Readonly<Record<string, string>>; batchDelayMs: number }>;
  /**
   * Under an npm script, stop when the parent is gone: npm runs scripts through `sh -c`, and dash does not
   * pass on npm's SIGTERM, so stopping npm would otherwise leave this process running.
   */
  lifecycle: Readonly<{ stopWithParent: boolean }>;
}>;

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Readonly<Record<string, string | undefined>>;

const durationUnitsMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** Parses "0,5s,5m,30m,7d" into waits in milliseconds (a bare number is milliseconds). */
export function parseDurationList(text: string): number[] | undefined {
  const parts = text.split(",").map((part) => part.trim());
  const out: number[] = [];
  for (const part of parts) {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(part);
    if (!match) return undefined;
    out.push(Math.round(Number(match[1]) * (durationUnitsMs[match[2] ?? "ms"] ?? 1)));
  }
  return out;
}

/** OTEL_EXPORTER_OTLP_HEADERS: `key=value` pairs separated by commas, values percent-encoded. */
export function parseHeaderList(text: string): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  for (const pair of text.split(",")) {
    if (pair.trim() === "") continue;
    const at = pair.indexOf("=");
    const key = pair.slice(0, at).trim();
    if (at < 1 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) return undefined;
    try {
      headers[key.toLowerCase()] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      return undefined;
    }
  }
  return headers;
}

function isBlobUrl(text: string): boolean {
  try {
    const url = new URL(text);
    if (url.protocol === "file:") return url.pathname.length > 1 && url.host === "" && url.search === "";
    return url.protocol === "s3:" && /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(url.hostname) && url.pathname === "";
  } catch {
    return false;
  }
}

function isUrl(text: string, protocols: readonly string[]): boolean {
  try {
    return protocols.includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

/**
 * Reads the configuration, applying operations.md's defaults. Every bad value is reported at once,
 * one line each, in a single ConfigError.
 */
export function loadConfig(
  env: Env,
  processName?: ProcessName,
  readFile: (path: string) => string = (path) => readFileSync(path, "utf8"),
): Config {
  const problems: string[] = [];
  const value = (name: string) => {
    const raw = env[name];
    return raw === undefined || raw.trim() === "" ? undefined : raw.trim();
  };
  const integer = (name: string, fallback: number, min: number, max: number) => {
    const raw = value(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return Number(raw);
  };
  const url = (name: string, protocols: readonly string[]) => {
    const raw = value(name);
    if (raw !== undefined && !isUrl(raw, protocols)) {
      problems.push(`${name} must be a URL (${protocols.join(" or ")}), got "${raw}"`);
      return undefined;
    }
    return raw;
  };

  const isService = processName !== undefined && processName !== "gateway";
  const port = value("PORT") === undefined ? undefined : integer("PORT", 0, 0, 65535);
  const internalPort = integer("INTERNAL_PORT", 8081, 0, 65535);
  const dbUrl = url("DATABASE_URL", ["postgres:", "postgresql:"]);
  const dbCa = certificates("DATABASE_CA_FILE", value, readFile, problems);
  if (dbCa !== undefined && dbUrl === undefined) problems.push("DATABASE_CA_FILE is only read with DATABASE_URL");
  const natsUrl = value("NATS_URL");
  if (natsUrl !== undefined) {
    for (const server of natsUrl.split(",")) {
      if (!isUrl(server.includes("://") ? server : `nats://${server}`, ["nats:", "tls:", "ws:", "wss:"])) {
        problems.push(`NATS_URL must be one or more comma-separated NATS server URLs, got "${natsUrl}"`);
        break;
      }
    }
  }
  const namespace = value("NATS_NAMESPACE");
  if (namespace !== undefined && !/^[a-z][a-z0-9_]{0,31}$/.test(namespace)) {
    problems.push(
      `NATS_NAMESPACE must be 1 to 32 lower-case letters, digits or underscores, starting with a letter, got "${namespace}"`,
    );
  }
  if (dbUrl !== undefined && natsUrl === undefined) {
    // The in-process bus reads outbox tables by id, which is commit order only on the one-connection
    // embedded database; with real Postgres events go through JetStream.
    problems.push("NATS_URL must be set with DATABASE_URL (real Postgres runs with NATS JetStream)");
  } else if (processName !== undefined && dbUrl === undefined) {
    problems.push(`DATABASE_URL must be set to run the ${processName} process on its own (distributed mode)`);
  }
  if (processName !== undefined && natsUrl === undefined && dbUrl === undefined) {
    problems.push(`NATS_URL must be set to run the ${processName} process on its own (distributed mode)`);
  }

  const servicePorts = {} as Record<ServiceName, number>;
  for (const name of serviceNames) {
    servicePorts[name] = integer(servicePortVariable(name), defaultServicePorts[name], 0, 65535);
  }

  const serviceUrls = {} as Record<ServiceName, string>;
  for (const name of serviceNames) {
    const variable = `${name.toUpperCase()}_URL`;
    serviceUrls[name] = url(variable, ["http:", "https:"]) ?? `http://127.0.0.1:${defaultServicePorts[name]}`;
  }

  const delivery = value("WEBHOOK_DELIVERY") ?? "on";
  if (delivery !== "on" && delivery !== "off")
    problems.push(`WEBHOOK_DELIVERY must be "on" or "off", got "${delivery}"`);
  const allowTargets = (value("WEBHOOK_ALLOW_TARGETS") ?? "")
    .split(",")
    .map((target) => target.trim())
    .filter((target) => target !== "");
  for (const target of allowTargets) {
    if (!/^(\[[0-9a-fA-F:.]+\]|[^:\s/]+):\d{1,5}$/.test(target)) {
      problems.push(`WEBHOOK_ALLOW_TARGETS entries must be host:port, got "${target}"`);
    }
  }
  const scheduleText = value("WEBHOOK_RETRY_SCHEDULE") ?? "0,5s,5m,30m,2h,5h,10h,14h,20h,24h";
  const retryScheduleMs = parseDurationList(scheduleText);
  if (!retryScheduleMs) {
    problems.push(`WEBHOOK_RETRY_SCHEDULE must be comma-separated durations like "0,5s,5m", got "${scheduleText}"`);
  }
  const duration = (name: string, fallback: string) => {
    const text = value(name) ?? fallback;
    const [ms] = parseDurationList(text) ?? [];
    if (ms === undefined || text.includes(",") || ms < 60_000) {
      problems.push(`${name} must be one duration of at least a minute, like "7d" or "36h", got "${text}"`);
      return parseDurationList(fallback)?.[0] ?? 0;
    }
    return ms;
  };
  const eventRetentionMs = duration("EVENT_RETENTION", "7d");
  const inboxRetentionMs = duration("INBOX_RETENTION", "8d");
  const logRetentionMs = duration("WEBHOOK_LOG_RETENTION", "30d");
  if (
    (processName === "gateway" || processName === "webhooks") &&
    value("SECRETS_KEY") === undefined &&
    value("SECRETS_KEY_FILE") === undefined
  ) {
    problems.push(
      `SECRETS_KEY (or SECRETS_KEY_FILE) is required by the ${processName} process: base64 of 32 random bytes (openssl rand -base64 32) that encrypts webhook and signing secrets at rest`,
    );
  }
  const disableAfterText = value("WEBHOOK_DISABLE_AFTER") ?? "5d";
  const [disableAfter] = disableAfterText === "off" ? [null] : (parseDurationList(disableAfterText) ?? []);
  if (disableAfter === undefined || disableAfterText.includes(",") || disableAfter === 0) {
    problems.push(`WEBHOOK_DISABLE_AFTER must be one duration like "5d" or "36h", or "off", got "${disableAfterText}"`);
  }
  if (inboxRetentionMs < eventRetentionMs) {
    problems.push(
      "INBOX_RETENTION must not be shorter than EVENT_RETENTION: a consumer must remember every event the bus can still redeliver",
    );
  }
  const blobUrl = value("BLOB_URL");
  if (blobUrl !== undefined && !isBlobUrl(blobUrl)) {
    problems.push(
      `BLOB_URL must be file:///absolute/dir or s3://bucket[?region=…&endpoint=…&forcePathStyle=true], got "${blobUrl}"`,
    );
  }
  const internalHost = value("INTERNAL_HOST") ?? "127.0.0.1";
  const internalToken = secret("INTERNAL_TOKEN", value, readFile, problems);
  const alsoAccepted = secret("INTERNAL_TOKEN_ACCEPTED", value, readFile, problems);
  if (alsoAccepted !== undefined && internalToken === undefined) {
    problems.push("INTERNAL_TOKEN_ACCEPTED is for rotating INTERNAL_TOKEN: set INTERNAL_TOKEN too");
  }
  if (internalToken === undefined && !isLoopback(internalHost)) {
    problems.push(
      `INTERNAL_TOKEN (or INTERNAL_TOKEN_FILE) must be set when INTERNAL_HOST (${internalHost}) is not loopback: the admin API and the services would otherwise trust any caller on the network`,
    );
  }
  const embeddedTemplate = value("EMBEDDED_TEMPLATE_DIR") ?? defaultTemplateDir();
  const level = value("LOG_LEVEL") ?? "info";
  if (!logLevels.includes(level)) problems.push(`LOG_LEVEL must be one of ${logLevels.join(", ")}, got "${level}"`);

  const otlpBase = value("OTEL_EXPORTER_OTLP_ENDPOINT");
  const otlpUrl =
    value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") ?? (otlpBase && `${otlpBase.replace(/\/+$/, "")}/v1/traces`);
  if (otlpUrl !== undefined && !isUrl(otlpUrl, ["http:", "https:"])) {
    problems.push(`OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL, got "${otlpUrl}"`);
  }
  const otlpHeaders = parseHeaderList(value("OTEL_EXPORTER_OTLP_HEADERS") ?? "");
  if (otlpHeaders === undefined)
    problems.push("OTEL_EXPORTER_OTLP_HEADERS must be a list of key=value pairs separated by commas");

  const config: Config = {
    mode: dbUrl === undefined ? "embedded" : "distributed",
    http: {
      port: port ?? (isService ? defaultServicePorts[processName as ServiceName] : 8080),
      internalPort,
      host: value("HOST") ?? "127.0.0.1",
      internalHost,
      servicePorts,
    },
    db: {
      url: dbUrl,
      ca: dbCa,
      dataDir: value("DATA_DIR") ?? "./.data",
      template: embeddedTemplate === "off" ? undefined : embeddedTemplate,
    },
    bus: { natsUrl, namespace, streamReplicas: integer("NATS_STREAM_REPLICAS", 1, 1, 5) },
    serviceUrls,
    gateway: {
      replicas: integer("GATEWAY_REPLICAS", 1, 1, 1000),
      internalUrl: url("GATEWAY_INTERNAL_URL", ["http:", "https:"]) ?? `http://127.0.0.1:${internalPort}`,
    },
    events: { retentionMs: eventRetentionMs, inboxRetentionMs },
    webhooks: {
      delivery: delivery !== "off",
      allowTargets,
      caFile: value("WEBHOOK_CA_FILE"),
      timeoutMs: integer("WEBHOOK_TIMEOUT_MS", 15_000, 1, 600_000),
      retryScheduleMs: retryScheduleMs ?? [],
      logRetentionMs,
      disableAfterMs: disableAfter ?? null,
    },
    blob: { url: blobUrl },
    pages: { tokenKey: value("PAGE_TOKEN_KEY"), tokenKeyFile: value("PAGE_TOKEN_KEY_FILE") },
    secrets: {
      key: value("SECRETS_KEY"),
      keyFile: value("SECRETS_KEY_FILE"),
      previousKey: value("SECRETS_KEY_PREVIOUS"),
      previousKeyFile: value("SECRETS_KEY_PREVIOUS_FILE"),
    },
    internal: {
      token: internalToken,
      acceptedTokens: [internalToken, alsoAccepted].filter((token): token is string => token !== undefined),
    },
    log: { level },
    metrics: { readDeadlineMs: integer("METRICS_READ_DEADLINE_MS", 2_000, 10, 60_000) },
    otel: {
      otlpUrl,
      headers: otlpHeaders ?? {},
      batchDelayMs: integer("OTEL_BSP_SCHEDULE_DELAY", 5_000, 1, 600_000),
    },
    lifecycle: { stopWithParent: env.npm_lifecycle_event !== undefined },
  };
  if (problems.length > 0) {
    // One problem on one line (a process refusing to start for want of a key says so in one line).
    throw new ConfigError(
      problems.length === 1
        ? `invalid configuration: ${problems[0]}`
        : `invalid configuration:\n  - ${problems.join("\n  - ")}`,
    );
  }
  return deepFreeze(config);
}

/** The variable that sets where the embedded mode's `service` listens: MARKERS_PORT, SERVERS_PORT, ... */
export function servicePortVariable(service: ServiceName): string {
  return `${service.toUpperCase()}_PORT`;
}

const MIN_SECRET_LENGTH = 32;

function certificates(
  name: string,
  value: (name: string) => string | undefined,
  readFile: (path: string) => string,
  problems: string[],
): string | undefined {
  const path = value(name);
  const pem = path === undefined ? undefined : fileNamedBy(name, path, readFile, problems);
  if (pem === undefined) return undefined;
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) {
    problems.push(`${name} "${path}" holds no PEM certificate`);
    return undefined;
  }
  return pem;
}

/** From NAME or the file NAME_FILE, never both; visible ASCII so it fits a header, 32+ so it is not guessable. */
function secret(
  name: string,
  value: (name: string) => string | undefined,
  readFile: (path: string) => string,
  problems: string[],
): string | undefined {
  const inline = value(name);
  const file = value(`${name}_FILE`);
  if (inline !== undefined && file !== undefined) {
    problems.push(`set ${name} or ${name}_FILE, not both`);
    return undefined;
  }
  let text = inline;
  if (file !== undefined) {
    text = fileNamedBy(`${name}_FILE`, file, readFile, problems)?.trim();
    if (text === undefined) return undefined;
  }
  if (text !== undefined && !new RegExp(`^[\\x21-\\x7e]{${MIN_SECRET_LENGTH},4096}$`).test(text)) {
    problems.push(`${name} must be ${MIN_SECRET_LENGTH} to 4096 visible ASCII characters (e.g. openssl rand -hex 32)`);
    return undefined;
  }
  return text;
}

function fileNamedBy(
  variable: string,
  path: string,
  readFile: (path: string) => string,
  problems: string[],
): string | undefined {
  try {
    return readFile(path);
  } catch (err) {
    problems.push(`${variable} "${path}" cannot be read: ${(err as Error).message}`);
    return undefined;
  }
}

/** Whether a listen address is reachable from this machine only. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127(\.\d{1,3}){3}$/.test(host);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
