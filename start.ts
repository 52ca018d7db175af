#!/usr/bin/env node
// The only process entry (STYLE.md §9): reads the configuration, owns signals and the exit code,
// and starts all five parts in one process (no argument) or one part of the distributed
// deployment (`node dist/start.js <gateway|markers|servers|replays|webhooks>`).
import {
  type Config,
  ConfigError,
  loadConfig,
  type ProcessName,
  processNames,
  serviceNames,
  servicePortVariable,
} from "./lib/config.js";
import { checkWritableDirs } from "./lib/data-dir.js";
import { configureLogging, logger } from "./lib/log.js";
import { configureMetrics } from "./lib/metrics.js";
import { startOtelExport } from "./lib/otel.js";
import type { Platform } from "./lib/platform.js";
import { asPortError, checkPortsFree, PortError, plannedListeners } from "./lib/ports.js";
import type { Running } from "./lib/service-host.js";
import { startAll, startPart } from "./start-all.js";

const log = logger("start");
const GRACE_MS = 10_000;
const PARENT_POLL_MS = 250;

async function main(): Promise<void> {
  const arg = process.argv[2];
  if (arg !== undefined && !processNames.includes(arg as ProcessName)) {
    process.stderr.write(`usage: start.js [${processNames.join("|")}]\n`);
    process.exitCode = 2;
    return;
  }
  const name = arg as ProcessName | undefined;
  let config: Config;
  try {
    config = loadConfig(process.env, name);
    await checkWritableDirs(config, name);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exitCode = 1;
    return;
  }
  configureLogging(config.log.level);
  configureMetrics(config.metrics);

  const stopping = new Promise<string>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
    if (config.lifecycle.stopWithParent) onParentExit(() => resolve("parent exited"));
  });
  // A busy port fails here, in milliseconds, before the database is opened (or created) and locked.
  const listeners = plannedListeners(config, name);
  try {
    await checkPortsFree(listeners);
  } catch (err) {
    if (!(err instanceof PortError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exitCode = 1;
    return;
  }
  const startedAt = performance.now();
  const otel = await startOtelExport(config.otel, name ? `replay-${name}` : "replay");
  const { openPlatform } = await import("./lib/platform.js");
  const platform = await openPlatform(config, name ?? "replay");
  // However the process ends from here on, a failed start included, it leaves no DATA_DIR lock behind.
  process.once("exit", () => platform.releaseAtExit());
  let parts: Running[];
  try {
    parts = name === undefined ? await startAllWithBanner(config, platform) : [await startPart(name, config, platform)];
  } catch (err) {
    // A port taken between the check and the listen.
    const portError = asPortError(err, listeners);
    if (!portError) throw err;
    process.stderr.write(`${portError.message}\n`);
    exitSoon(1);
    return;
  }
  log.info(
    { startMs: Math.round(performance.now() - startedAt), rssMb: Math.round(process.memoryUsage().rss / 2 ** 20) },
    "ready",
  );

  const reason = await stopping;
  log.info({ reason }, "draining");
  // Last resort against a leaked handle: the drain itself ends by the parts' shared deadline.
  setTimeout(() => {
    log.error("shutdown did not finish in time; exiting");
    process.exit(0);
  }, GRACE_MS + 5_000).unref();
  // The gateway is first in `parts`, so nothing new reaches the services while they drain; all of
  // them share one deadline (operations.md: in-flight work gets up to 10 s in all).
  const deadline = Date.now() + GRACE_MS;
  for (const part of parts) await part.close(deadline).catch((err) => log.error({ err }, "close failed"));
  await platform.close();
  await otel?.stop();
  process.exitCode = 0;
}

/**
 * Calls `fn` once this process has been re-parented (to init or a subreaper), which is how a parent's
 * exit shows on POSIX systems; polled, since Node has no notification for it.
 */
function onParentExit(fn: () => void): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    fn();
  }, PARENT_POLL_MS);
  // The drain ends by emptying the event loop, which this timer must not hold open.
  timer.unref();
}

/**
 * The embedded default (start-all.ts), with a banner for the person who started it. The banner goes
 * to stderr, so that stdout stays pure JSON log lines.
 */
async function startAllWithBanner(config: Config, platform: Platform): Promise<Running[]> {
  const { gateway, services: started } = await startAll(config, platform);
  const { createDevTenant, devKeyCommand, findDevTenant } = await import("./gateway/dev-tenant.js");
  process.stderr.write(
    `\nreplay service (${config.db.url ? "Postgres" : "embedded Postgres"}, ${config.bus.natsUrl ? "NATS" : "in-process bus"})\n`,
  );
  process.stderr.write(
    `  gateway:      ${gateway.bound.public}\n  internal API: ${gateway.bound.internal} (REPLAYCTL_URL)\n`,
  );
  process.stderr.write(
    `  services (gRPC, Connect; docs/grpc-clients.md):\n${serviceNames
      .map((service, i) => `    ${`${service}:`.padEnd(13)} ${started[i]?.url} (${servicePortVariable(service)})\n`)
      .join("")}`,
  );
  if (gateway.fresh) {
    const dev = await createDevTenant(gateway.internalUrl, config.internal.token);
    process.stderr.write(
      [
        "  dev tenant (first start; the secrets are shown only now):",
        `    tenant:         ${dev.tenantId}`,
        `    owner member:   ${dev.memberId}`,
        `    API key:        ${dev.key}  (all scopes)`,
        `    signing kid:    ${dev.kid}`,
        `    signing secret: ${dev.secret}`,
        `  try: curl -H "Authorization: Bearer ${dev.key}" ${gateway.url}/v1/api/servers`,
        "  or, from TypeScript with @replay/client (clients/typescript/README.md):",
        `    createReplayClient({ baseUrl: "${gateway.url}", apiKey: "${dev.key}", signingKey: { tenant: "${dev.tenantId}", kid: "${dev.kid}", secret: "${dev.secret}" } })`,
        "",
      ].join("\n"),
    );
  } else {
    // The first start's secrets were shown only then; say which tenant is the dev one and how to
    // mint a new key for it. A failed look-up costs the hint, not the start.
    const dev = await findDevTenant(gateway.internalUrl, config.internal.token).catch((err: unknown) => {
      log.warn({ err }, "could not look up the dev tenant for the banner");
      return undefined;
    });
    if (dev) {
      process.stderr.write(
        [
          "  dev tenant (the oldest tenant; its API key and signing secret were shown only on the first start):",
          `    tenant:         ${dev.tenantId}`,
          ...(dev.ownerMemberId ? [`    owner member:   ${dev.ownerMemberId}`] : []),
          `  new API key (all scopes): ${devKeyCommand(dev)}`,
          `  new signing key:          npx replayctl signing-key create --tenant ${dev.tenantId}`,
          "",
        ].join("\n"),
      );
    }
  }
  return [gateway, ...started];
}

/** Ends a failed start: open handles (pools, sockets, half-started parts) would keep it alive. */
function exitSoon(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 1000).unref();
}

main().catch((err) => {
  log.fatal({ err }, "failed to start");
  exitSoon(1);
});
