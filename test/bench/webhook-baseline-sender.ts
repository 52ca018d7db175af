// The webhooks benchmark's baseline: one Node process POSTing the same signed bodies straight to the
// receiver, CONCURRENCY at a time on kept-alive connections (undici Pool), signing each request as a
// delivery attempt does (lib's deliveryHeaders: a fresh timestamp, HMAC-SHA256 over it and the body).
// No database, bus, lease or log. Env: BODIES_FILE (one JSON {eventId, event, body} a line), TARGETS
// (JSON [{url, secret}]: every body goes to every target), CONCURRENCY, CA_FILE. Prints
// {"sent":N,"failed":N,"elapsedMs":N,"cpuMs":N} when done.
//
// With LOG_DATABASE_URL it is the benchmark's floor: the same sending, and a delivery log kept the
// cheapest way we know (delivery-log-floor.ts): what any sender that logs its deliveries pays at least.
import { readFileSync } from "node:fs";
import { createSecureContext, rootCertificates } from "node:tls";
import { Agent } from "undici";
import { deliveryHeaders } from "../../services/webhooks/delivery/signature.js";
import { openDeliveryLogFloor } from "./delivery-log-floor.js";

const {
  BODIES_FILE: bodiesFile,
  TARGETS: targetsJson,
  CONCURRENCY: concurrencyText = "160",
  CA_FILE: caFile,
  LOG_DATABASE_URL: logDatabaseUrl,
} = process.env;
if (!bodiesFile || !targetsJson || !caFile)
  throw new Error("webhook-baseline-sender needs BODIES_FILE, TARGETS and CA_FILE");
type Event = { event: string; eventId: string; body: string };
type Delivery = Event & { url: URL; secret: string };
const events: Event[] = readFileSync(bodiesFile, "utf8")
  .split("\n")
  .filter((line) => line !== "")
  .map((line) => JSON.parse(line));
const targets = (JSON.parse(targetsJson) as { url: string; secret: string }[]).map((t) => ({
  ...t,
  url: new URL(t.url),
}));
// Event by event, each to every target: the order a fan-out makes.
const deliveries: Delivery[] = events.flatMap((e) => targets.map((t) => ({ ...e, ...t })));

const secureContext = createSecureContext({ ca: [...rootCertificates, readFileSync(caFile, "utf8")] });
const agent = new Agent({ connect: { secureContext } });
const log = logDatabaseUrl === undefined ? undefined : await openDeliveryLogFloor(logDatabaseUrl);
let next = 0;
let failed = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: Number(concurrencyText) }, async () => {
    while (next < deliveries.length) {
      const d = deliveries[next++] as Delivery;
      const { url } = d;
      const timestampS = Math.floor(Date.now() / 1000);
      try {
        const res = await agent.request({
          origin: url.origin,
          path: url.pathname,
          method: "POST",
          headers: deliveryHeaders({ ...d, timestampS }),
          body: d.body,
        });
        await res.body.dump();
        if (res.statusCode < 200 || res.statusCode >= 300) failed++;
        log?.record(d.eventId, d.body, url.href, res.statusCode, timestampS);
      } catch {
        failed++;
      }
    }
  }),
);
const logPostgresCpuMs = (await log?.close()) ?? 0;
const elapsedMs = performance.now() - started;
const { user, system } = process.cpuUsage();
process.stdout.write(
  `${JSON.stringify({ sent: deliveries.length, failed, elapsedMs, cpuMs: (user + system) / 1000, logPostgresCpuMs })}\n`,
);
await agent.close();
