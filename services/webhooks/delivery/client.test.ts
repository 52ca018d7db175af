import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createDeliveryClient, type DeliveryClientOptions, RESPONSE_BODY_MAX_BYTES } from "./client.js";
import { generateWebhookSecret } from "./secret.js";
import { verifyWebhookSignature } from "./signature.js";
import { parseAllowTargets, type Resolver } from "./target.js";
import { vetWebhookUrl } from "./webhook-url.js";

// A self-signed certificate for hook.test and the two loopback addresses the receivers listen on,
// trusted through the client's extra CA as WEBHOOK_CA_FILE would be.
let tlsFiles: { cert: string; key: string };
let certDir: string;
beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), "webhook-client-"));
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"],
      ...["-keyout", join(certDir, "key.pem"), "-out", join(certDir, "cert.pem"), "-subj", "/CN=hook.test"],
      ...["-addext", "subjectAltName=DNS:hook.test,IP:127.0.0.1,IP:127.0.0.2,IP:::1"],
    ],
    { stdio: "ignore" },
  );
  tlsFiles = {
    cert: readFileSync(join(certDir, "cert.pem"), "utf8"),
    key: readFileSync(join(certDir, "key.pem"), "utf8"),
  };
});
afterAll(() => rmSync(certDir, { recursive: true, force: true }));

type Received = { method: string; url: string; headers: IncomingMessage["headers"]; raw: Buffer; localAddress: string };
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A real HTTPS receiver; each test gets its own, closed when the test ends. */
async function startReceiver(handler: Handler = (_req, res) => res.end("{}"), host = "127.0.0.1", port = 0) {
  const requests: Received[] = [];
  let connections = 0;
  const server = createServer(tlsFiles, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const { method = "", url = "", headers } = req;
      requests.push({ method, url, headers, raw: Buffer.concat(chunks), localAddress: req.socket.localAddress ?? "" });
      handler(req, res);
    });
  });
  server.on("secureConnection", () => connections++);
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  onTestFinished(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const actualPort = (server.address() as AddressInfo).port;
  return { port: actualPort, requests, connections: () => connections };
}

/** DNS as the test says: a name maps to its addresses, or to a list of answers given in turn. */
function testResolver(answers: Record<string, string[] | string[][]>) {
  const calls: string[] = [];
  const resolve: Resolver = async (hostname) => {
    calls.push(hostname);
    const found = answers[hostname];
    if (found === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    if (Array.isArray(found[0])) {
      const turns = found as string[][];
      return turns[Math.min(calls.filter((name) => name === hostname).length, turns.length) - 1] ?? [];
    }
    return found as string[];
  };
  return { resolve, calls };
}

function client(options: Partial<DeliveryClientOptions> & { allow?: string[] } = {}) {
  const created = createDeliveryClient({
    timeoutMs: 5000,
    extraCaPem: tlsFiles.cert,
    allowTargets: parseAllowTargets(options.allow ?? []),
    resolve: testResolver({ "hook.test": ["127.0.0.1"] }).resolve,
    ...options,
  });
  onTestFinished(() => created.close());
  return created;
}

function delivery(url: string) {
  const eventId = randomUUID();
  const body = JSON.stringify({
    event_id: eventId,
    event: "asset.ready",
    created_at: new Date().toISOString(),
    tenant_id: randomUUID(),
    data: { asset: { id: randomUUID(), title: "naïve ☃" } },
  });
  return { url, secret: generateWebhookSecret(), event: "asset.ready", eventId, body };
}

describe("delivery client", () => {
  it("delivers a signed POST that the receiver verifies over the raw body, and reports success", async () => {
    const receiver = await startReceiver((_req, res) => res.writeHead(204).end());
    const request = delivery(`https://hook.test:${receiver.port}/hooks/a?source=replay`);
    const result = await client({ allow: [`hook.test:${receiver.port}`] }).send(request);

    expect(result).toMatchObject({ statusCode: 204, error: null, retryAfterMs: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    const [received] = receiver.requests;
    expect(received).toMatchObject({ method: "POST", url: "/hooks/a?source=replay" });
    expect(received?.raw.toString("utf8")).toBe(request.body);
    expect(received?.headers).toMatchObject({
      host: `hook.test:${receiver.port}`,
      "content-type": "application/json",
      "user-agent": "ReplayService-Webhooks/1",
      "x-fv-event": "asset.ready",
      "x-fv-event-id": request.eventId,
    });
    const timestamp = Number(received?.headers["x-fv-timestamp"]);
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(5);
    expect(verifyWebhookSignature(request.secret, received?.headers ?? {}, received?.raw ?? Buffer.alloc(0))).toBe(
      true,
    );
    expect(verifyWebhookSignature(generateWebhookSecret(), received?.headers ?? {}, received?.raw ?? "")).toBe(false);
  });

  it.each([
    [500, "HTTP 500"],
    [410, "HTTP 410"],
    [404, "HTTP 404"],
    [400, "HTTP 400"],
  ])("reports a %d answer as a failed attempt (%s)", async (status, error) => {
    const receiver = await startReceiver((_req, res) => res.writeHead(status).end("nope"));
    const result = await client().send(delivery(`https://127.0.0.1:${receiver.port}/`));
    // The literal 127.0.0.1 is refused unless allowed; allow it to reach the answer.
    expect(result.error).toMatch(/blocked address: 127\.0\.0\.1 .*\(loopback\)/);
    const allowed = await client({ allow: [`127.0.0.1:${receiver.port}`] }).send(
      delivery(`https://127.0.0.1:${receiver.port}/`),
    );
    expect(allowed).toMatchObject({ statusCode: status, error, retryAfterMs: null });
  });

  it("reads Retry-After on 429 (seconds) and 503 (HTTP-date), and ignores it on other statuses", async () => {
    const later = new Date(Date.now() + 90_000).toUTCString();
    const answers: Record<string, [number, string]> = {
      "/429": [429, "120"],
      "/503": [503, later],
      "/500": [500, "120"],
    };
    const receiver = await startReceiver((req, res) => {
      const [status, retryAfter] = answers[req.url ?? ""] ?? [200, ""];
      res.writeHead(status, { "retry-after": retryAfter }).end();
    });
    const c = client({ allow: [`hook.test:${receiver.port}`] });
    const base = `https://hook.test:${receiver.port}`;
    expect(await c.send(delivery(`${base}/429`))).toMatchObject({
      statusCode: 429,
      error: "HTTP 429",
      retryAfterMs: 120_000,
    });
    const unavailable = await c.send(delivery(`${base}/503`));
    expect(unavailable).toMatchObject({ statusCode: 503, error: "HTTP 503" });
    expect(unavailable.retryAfterMs).toBeGreaterThan(80_000);
    expect(unavailable.retryAfterMs).toBeLessThanOrEqual(90_000);
    expect(await c.send(delivery(`${base}/500`))).toMatchObject({ statusCode: 500, retryAfterMs: null });
  });

  it("never follows a redirect: a 3xx is a failed attempt and the target is not requested", async () => {
    const receiver = await startReceiver((req, res) => {
      if (req.url === "/moved") res.writeHead(307, { location: "/target" }).end();
      else res.writeHead(200).end();
    });
    const result = await client({ allow: [`hook.test:${receiver.port}`] }).send(
      delivery(`https://hook.test:${receiver.port}/moved`),
    );
    expect(result).toMatchObject({ statusCode: 307, error: "redirect not followed" });
    expect(receiver.requests.map((r) => r.url)).toEqual(["/moved"]);
  });

  it("fails an attempt that hangs at the timeout and releases its socket", async () => {
    let hungSocketClosed: Promise<void> | undefined;
    const hanging = await startReceiver((req) => {
      hungSocketClosed = new Promise((resolve) => req.socket.once("close", () => resolve()));
    });
    const timeoutMs = 500;
    const result = await client({ timeoutMs, allow: [`hook.test:${hanging.port}`] }).send(
      delivery(`https://hook.test:${hanging.port}/`),
    );
    expect(result).toMatchObject({ statusCode: null, error: "timeout" });
    expect(result.durationMs).toBeGreaterThanOrEqual(timeoutMs - 50);
    // Ended by the timeout, not by anything later (undici's own timeouts are 300 s).
    expect(result.durationMs).toBeLessThan(timeoutMs + 30_000);
    await hungSocketClosed;
  });

  it("answers other receivers while one attempt hangs", async () => {
    let cutHung = () => {};
    const hanging = await startReceiver((req) => {
      cutHung = () => req.socket.destroy();
    });
    const healthy = await startReceiver();
    // A timeout no machine reaches during the test: the hung attempt is still open for every healthy send.
    const c = client({ timeoutMs: 600_000, allow: [`hook.test:${hanging.port}`, `hook.test:${healthy.port}`] });
    let hungSettled = false;
    const hung = c.send(delivery(`https://hook.test:${hanging.port}/`)).finally(() => {
      hungSettled = true;
    });
    await expect.poll(() => hanging.requests.length, { timeout: 30_000 }).toBe(1);
    for (let i = 0; i < 3; i++) {
      expect(await c.send(delivery(`https://hook.test:${healthy.port}/`))).toMatchObject({
        statusCode: 200,
        error: null,
      });
    }
    expect(hungSettled).toBe(false);
    cutHung();
    expect(await hung).toMatchObject({ statusCode: null });
  });

  it("fails at the timeout when the answer's body trickles in past it", async () => {
    // A byte every 50 ms: no read ever idles long enough for undici's body timeout, so only the
    // attempt's own deadline ends it.
    const receiver = await startReceiver((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      const drip = setInterval(() => res.write("x"), 50);
      res.once("close", () => clearInterval(drip));
    });
    const result = await client({ timeoutMs: 600, allow: [`hook.test:${receiver.port}`] }).send(
      delivery(`https://hook.test:${receiver.port}/`),
    );
    expect(result).toMatchObject({ statusCode: 200, error: "timeout" });
    expect(result.durationMs).toBeGreaterThanOrEqual(550);
    expect(result.durationMs).toBeLessThan(10_000);
  });

  it("fails at the timeout when resolving the host hangs", async () => {
    const resolve: Resolver = () => new Promise(() => {});
    const result = await client({ timeoutMs: 300, resolve }).send(delivery("https://slow-dns.test/"));
    expect(result).toMatchObject({ statusCode: null, error: "timeout" });
    expect(result.durationMs).toBeLessThan(10_000);
  });

  it("reads at most a small bound of an endless answer, then drops the connection", async () => {
    let finished: Promise<{ sentBytes: number; complete: boolean }> | undefined;
    const receiver = await startReceiver((_req, res) => {
      const chunk = Buffer.alloc(16 * 1024, "x");
      let sentBytes = 0;
      finished = new Promise((resolve) =>
        res.once("close", () => resolve({ sentBytes, complete: res.writableFinished })),
      );
      res.writeHead(200, { "content-type": "text/plain" });
      const pump = () => {
        while (!res.destroyed && sentBytes < 256 * 1024 * 1024) {
          sentBytes += chunk.length;
          if (!res.write(chunk)) {
            res.once("drain", pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const result = await client({ allow: [`hook.test:${receiver.port}`] }).send(
      delivery(`https://hook.test:${receiver.port}/`),
    );
    expect(result).toMatchObject({ statusCode: 200, error: null });
    const served = await finished;
    expect(served?.complete).toBe(false);
    // Socket buffers on both sides hold some, but nowhere near the 256 MiB on offer.
    expect(served?.sentBytes).toBeLessThan(16 * 1024 * 1024);
    expect(RESPONSE_BODY_MAX_BYTES).toBe(4096);
  });

  it("keeps connections alive per origin, so consecutive deliveries reuse them", async () => {
    const receiver = await startReceiver((_req, res) => res.end(JSON.stringify({ ok: true })));
    const c = client({ allow: [`hook.test:${receiver.port}`] });
    for (let i = 0; i < 20; i++) {
      expect(await c.send(delivery(`https://hook.test:${receiver.port}/`))).toMatchObject({ error: null });
    }
    expect(receiver.requests).toHaveLength(20);
    // undici opens a second connection when the next request comes before the first connection's
    // drain (a tick after its first answer); every later request reuses the two.
    expect(receiver.connections()).toBeLessThanOrEqual(2);
  });

  it("blocks DNS rebinding: public at subscription, loopback at connect time, and nothing is sent", async () => {
    const receiver = await startReceiver();
    const dns = testResolver({ "rebind.test": [["93.184.216.34"], ["127.0.0.1"]] });
    const url = `https://rebind.test:${receiver.port}/`;
    expect(await vetWebhookUrl(url, { resolve: dns.resolve, allowTargets: parseAllowTargets([]) })).toBeUndefined();

    const result = await client({ resolve: dns.resolve }).send(delivery(url));
    expect(result).toMatchObject({
      statusCode: null,
      error: "blocked address: 127.0.0.1 is not a public address (loopback)",
    });
    expect(dns.calls).toEqual(["rebind.test", "rebind.test"]);
    expect(receiver.requests).toHaveLength(0);
    expect(receiver.connections()).toBe(0);
  });

  it("blocks a host when any one of its addresses is blocked", async () => {
    const dns = testResolver({ "mixed.test": ["93.184.216.34", "10.0.0.8"] });
    const result = await client({ resolve: dns.resolve }).send(delivery("https://mixed.test/"));
    expect(result).toMatchObject({ statusCode: null, error: expect.stringContaining("10.0.0.8") });
  });

  it("connects to the address it resolved once, not to whatever a second lookup would return", async () => {
    // Two receivers on one port: 127.0.0.1 is what the name resolves to first, 127.0.0.2 afterwards.
    const first = await startReceiver();
    const second = await startReceiver(undefined, "127.0.0.2", first.port);
    const dns = testResolver({ "hook.test": [["127.0.0.1"], ["127.0.0.2"]] });
    const result = await client({ resolve: dns.resolve, allow: [`hook.test:${first.port}`] }).send(
      delivery(`https://hook.test:${first.port}/`),
    );
    expect(result).toMatchObject({ statusCode: 200, error: null });
    expect(dns.calls).toEqual(["hook.test"]);
    expect(first.requests.map((r) => r.localAddress)).toEqual(["127.0.0.1"]);
    expect(second.requests).toHaveLength(0);
  });

  it("checks the certificate against the URL's host name, not the address it connects to", async () => {
    const receiver = await startReceiver();
    const dns = testResolver({ "hook.test": ["127.0.0.1"], "other.test": ["127.0.0.1"] });
    const c = client({ resolve: dns.resolve, allow: [`hook.test:${receiver.port}`, `other.test:${receiver.port}`] });
    expect(await c.send(delivery(`https://hook.test:${receiver.port}/`))).toMatchObject({ error: null });
    expect(await c.send(delivery(`https://other.test:${receiver.port}/`))).toMatchObject({
      statusCode: null,
      error: "TLS error: ERR_TLS_CERT_ALTNAME_INVALID",
    });
    expect(receiver.requests).toHaveLength(1);
  });

  it("trusts the self-signed receiver only through the extra CA", async () => {
    const receiver = await startReceiver();
    const result = await client({ extraCaPem: undefined, allow: [`hook.test:${receiver.port}`] }).send(
      delivery(`https://hook.test:${receiver.port}/`),
    );
    expect(result).toMatchObject({ statusCode: null, error: expect.stringMatching(/^TLS error: /) });
    expect(receiver.requests).toHaveLength(0);
  });

  it("judges numeric host forms as the WHATWG parser reads them", async () => {
    const receiver = await startReceiver();
    for (const host of ["2130706433", "0x7f.1", "0x7f000001", "127.1", "[::ffff:127.0.0.1]"]) {
      const result = await client().send(delivery(`https://${host}:${receiver.port}/`));
      expect(result, host).toMatchObject({ statusCode: null, error: expect.stringContaining("(loopback)") });
    }
    const allowed = client({ allow: [`127.0.0.1:${receiver.port}`] });
    expect(await allowed.send(delivery(`https://0x7f.1:${receiver.port}/`))).toMatchObject({ error: null });
    expect(receiver.requests).toHaveLength(1);
  });

  it("reaches an IPv6 receiver by literal or by name only when WEBHOOK_ALLOW_TARGETS names it", async () => {
    const receiver = await startReceiver(undefined, "::1");
    const literal = `https://[::1]:${receiver.port}/`;
    expect(await client().send(delivery(literal))).toMatchObject({ error: expect.stringContaining("(loopback)") });
    expect(await client({ allow: [`[::1]:${receiver.port}`] }).send(delivery(literal))).toMatchObject({ error: null });
    const dns = testResolver({ "hook.test": ["::1"] });
    const byName = client({ resolve: dns.resolve, allow: [`hook.test:${receiver.port}`] });
    expect(await byName.send(delivery(`https://hook.test:${receiver.port}/`))).toMatchObject({ error: null });
    expect(receiver.requests.map((r) => r.localAddress)).toEqual(["::1", "::1"]);
  });

  it.each([
    ["10.1.2.3", "private"],
    ["172.20.0.1", "private"],
    ["192.168.10.10", "private"],
    ["127.0.0.53", "loopback"],
    ["169.254.169.254", "link-local"],
    ["100.100.100.200", "cgnat"],
    ["0.0.0.0", "unspecified"],
    ["0.0.0.7", "this-network"],
    ["224.0.0.251", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["192.0.2.55", "documentation"],
    ["198.51.100.1", "documentation"],
    ["203.0.113.9", "documentation"],
    ["198.18.5.5", "benchmark"],
    ["240.1.1.1", "reserved"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["fd00:ec2::254", "unique-local"],
    ["fe80::1", "link-local"],
    ["ff02::fb", "multicast"],
    ["2001:db8::5", "documentation"],
    ["::ffff:169.254.169.254", "link-local"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["2002:a00:1::1", "private"],
    ["2001:0:53aa:64c::1", "teredo"],
    ["5f00::1", "not-global-unicast"],
  ])("refuses to connect when the host resolves to %s (%s)", async (address, reason) => {
    const dns = testResolver({ "target.test": [address] });
    const result = await client({ resolve: dns.resolve }).send(delivery("https://target.test/"));
    expect(result).toMatchObject({
      statusCode: null,
      error: `blocked address: ${address} is not a public address (${reason})`,
      retryAfterMs: null,
    });
  });

  it("reports a name that does not resolve, a refused connection and a non-https URL without an HTTP status", async () => {
    const c = client({ allow: ["hook.test:1"] });
    expect(await c.send(delivery("https://nowhere.test/"))).toMatchObject({
      statusCode: null,
      error: "DNS lookup of nowhere.test failed: ENOTFOUND",
    });
    expect(await c.send(delivery("https://hook.test:1/"))).toMatchObject({
      statusCode: null,
      error: "connection error: ECONNREFUSED",
    });
    for (const url of ["http://hook.test/", "not a url"]) {
      expect(await c.send(delivery(url))).toMatchObject({ statusCode: null, error: "url is not an https URL" });
    }
  });
});
