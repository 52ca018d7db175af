// The embedded mode as `npm start` runs it (one process, embedded Postgres, in-process bus): the
// dev tenant printed on the first start works, a restart says how to mint it a new key, and the
// gateway's authentication holds there too.
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createReplayClient } from "@replay/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signRequest } from "../lib/signing.js";
import { type BannerClientOptions, bannerClientOptions } from "./banner.js";
import { expectProblem } from "./expect.js";
import { ALL_SCOPES, pollUntilRevoked, provisionTenant, type Signer, send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { rawUploadArchive, recordingOnNewServer } from "./recorder.js";
import { runReplayctl } from "./replayctl.js";
import { type System, startEmbeddedSystem } from "./system.js";

type DevTenant = { tenantId: string; memberId: string; key: string; kid: string; secret: string; signer: Signer };

/** The dev tenant block of start.ts, once it is complete in the output. */
function parseDevTenant(output: string): DevTenant | undefined {
  const field = (label: string) => new RegExp(`^\\s+${label}:\\s+(\\S+)`, "m").exec(output)?.[1];
  const tenantId = field("tenant");
  const memberId = field("owner member");
  const key = field("API key");
  const kid = field("signing kid");
  const secret = field("signing secret");
  if (!tenantId || !memberId || !key || !kid || !secret) return undefined;
  return { tenantId, memberId, key, kid, secret, signer: { tenant: tenantId, kid, secret } };
}

const EMPTY_PAGE = { results: [], next_page_token: "", page_size: 20 };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("embedded mode (npm start)", () => {
  let dataDir: string;
  let sys: System;
  let dev: DevTenant;

  beforeAll(async () => {
    // Our own data directory, so that a second start can reuse it.
    dataDir = await mkdtemp(join(tmpdir(), "replay-embedded-e2e-"));
    sys = await startEmbeddedSystem({ DATA_DIR: dataDir, LOG_LEVEL: "info" });
    dev = (await pollUntil(
      async () => parseDevTenant(sys.output()),
      (found) => found !== undefined,
      30_000,
    )) as DevTenant;
  });

  afterAll(async () => {
    try {
      if (sys) {
        const codes = await sys.stop();
        expect(codes, sys.output()).toEqual([0]);
      }
    } finally {
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
    }
  });

  it("listens on loopback by default, and its banner shows the addresses really bound", () => {
    const out = sys.output();
    const port = new URL(sys.baseUrl).port;
    const internalPort = new URL(sys.internalUrl).port;
    expect(out).toContain(`gateway:      http://127.0.0.1:${port}\n`);
    expect(out).toContain(`internal API: http://127.0.0.1:${internalPort} (REPLAYCTL_URL)`);
  });

  it("keeps stdout to JSON log lines (the banner goes to stderr), with one access line per request", async () => {
    const res = await send(sys.baseUrl, "GET", "/v1/api/servers", {
      headers: { authorization: `Bearer ${dev.key}`, "x-request-id": "access-log-1" },
    });
    expect(res.status).toBe(200);
    expectProblem(
      await send(sys.baseUrl, "GET", "/nowhere", { headers: { "x-request-id": "access-log-2" } }),
      404,
      "NOT_FOUND",
    );
    const lines = () =>
      sys
        .stdout()
        .split("\n")
        .filter((line) => line !== "");
    const access = await pollUntil(
      async () => lines().filter((line) => line.includes("access-log-")),
      (found) => found.length === 2,
      30_000,
    );
    for (const line of lines()) expect(() => JSON.parse(line), line).not.toThrow();
    expect(sys.stdout()).not.toContain("dev tenant");
    const [ok, missing] = access.map((line) => JSON.parse(line));
    expect(ok).toMatchObject({
      level: 30,
      name: "gateway:access",
      method: "GET",
      route: "/v1/api/servers",
      status: 200,
      tenant: dev.tenantId,
      requestId: "access-log-1",
    });
    expect(ok.durationMs).toBeGreaterThanOrEqual(0);
    // A 4xx is an info line like any other, never an error with a stack.
    expect(missing).toMatchObject({ level: 30, status: 404, tenant: null, requestId: "access-log-2" });
    expect(sys.stdout()).not.toMatch(/"level":50[^\n]*access-log-2/);
  });

  it("creates the first start's database from the initdb template (`npm run build` made it), not by initdb", () => {
    const out = sys.output();
    expect(out).toMatch(/"msg":"embedded database created from the template"/);
    expect(out).not.toMatch(/created by initdb/);
  });

  it("prints a dev tenant on the first start: tenant, owner, an all-scopes API key and a signing key", () => {
    const out = sys.output();
    expect(out).toContain("dev tenant (first start");
    expect(dev.tenantId).toMatch(UUID);
    expect(dev.memberId).toMatch(UUID);
    expect(dev.key).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
    expect(dev.kid.length).toBeGreaterThan(0);
    expect(dev.secret.length).toBeGreaterThan(0);
    expect(out).toMatch(/\(all scopes\)/);
  });

  it("the printed API key lists the dev tenant's servers: none yet", async () => {
    const res = await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: { authorization: `Bearer ${dev.key}` } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ servers: [] });
    expect(res.headers.get("ratelimit-policy")).toMatch(/^"tenant";q=\d+;w=1$/);
  });

  it("the printed signing key signs GET /v1/replays: the dev tenant's empty first page", async () => {
    const res = await sendSigned(sys.baseUrl, dev.signer, "GET", "/v1/replays");
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual(EMPTY_PAGE);
  });

  it("prints the client's options for the dev tenant, and a client made with them calls both schemes", async () => {
    const options = bannerClientOptions(sys.output());
    expect(options, sys.output()).toEqual({ baseUrl: sys.baseUrl, apiKey: dev.key, signingKey: dev.signer });
    const client = createReplayClient(options as BannerClientOptions);
    const servers = await client.GET("/v1/api/servers");
    expect(servers.response.status).toBe(200);
    const replays = await client.GET("/v1/replays");
    expect(replays.response.status).toBe(200);
    expect(replays.data).toEqual(EMPTY_PAGE);
  });

  it("the printed API key holds every scope", async () => {
    const id = randomUUID();
    const routes: [string, string, unknown][] = [
      ["GET", "/v1/api/servers", undefined],
      ["GET", "/v1/api/servers/pending", undefined],
      ["POST", "/v1/api/servers", { name: `dev-${id.slice(0, 8)}` }],
      ["GET", "/v1/api/replays", undefined],
      ["POST", "/v1/api/timeline-events", { replayId: id, tick: 1, label: "dev" }],
      ["POST", `/v1/webhooks/deliveries/${id}/replay`, undefined],
    ];
    for (const [method, path, body] of routes) {
      const res = await send(sys.baseUrl, method, path, { body, headers: { authorization: `Bearer ${dev.key}` } });
      expect(res.status, `${method} ${path}: ${res.text}`).not.toBe(401);
      expect(res.body?.code, `${method} ${path}: ${res.text}`).not.toBe("INSUFFICIENT_SCOPE");
    }
  });

  it("refuses a key route without credentials (UNAUTHENTICATED) and with an unknown key (INVALID_API_KEY)", async () => {
    expectProblem(await send(sys.baseUrl, "GET", "/v1/api/servers"), 401, "UNAUTHENTICATED");
    expectProblem(
      await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: { authorization: `Basic ${dev.key}` } }),
      401,
      "UNAUTHENTICATED",
    );
    const unknown = `svc_live_${randomBytes(30).toString("base64url").replace(/[-_]/g, "x").slice(0, 40)}`;
    expectProblem(
      await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: { authorization: `Bearer ${unknown}` } }),
      401,
      "INVALID_API_KEY",
    );
    expectProblem(
      await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: { authorization: `Bearer ${dev.key}x` } }),
      401,
      "INVALID_API_KEY",
    );
  });

  it("refuses a revoked key at once", async () => {
    const t = await provisionTenant(sys);
    const doomed = await t.mintKey(["servers:read"]);
    expect((await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer(doomed.key) })).status).toBe(200);
    await sys.admin.revokeApiKey({ keyId: doomed.keyId });
    const revokedAt = performance.now();
    // "At once" is decisions.md's second, for when a request is sent, not when its answer comes
    // back (pollUntilRevoked says why): no request sent a second after the revocation is accepted.
    const { refused, lastAcceptedSentMs } = await pollUntilRevoked(sys.baseUrl, t.bearer(doomed.key), revokedAt);
    expect(lastAcceptedSentMs).toBeLessThan(1000);
    expectProblem(refused, 401, "INVALID_API_KEY");
  });

  it("refuses a signed route without a signature, without a tenant, and with a wrong signature", async () => {
    expectProblem(await send(sys.baseUrl, "GET", "/v1/replays"), 401, "UNAUTHENTICATED");
    expectProblem(
      await send(sys.baseUrl, "GET", "/v1/replays", { headers: { authorization: `Bearer ${dev.key}` } }),
      401,
      "UNAUTHENTICATED",
    );
    const { authorization } = signRequest({ ...dev.signer, method: "GET", url: `${sys.baseUrl}/v1/replays` });
    const noTenant = authorization.replace(/tenant=[^,]+,/, "");
    expectProblem(
      await send(sys.baseUrl, "GET", "/v1/replays", { headers: { authorization: noTenant } }),
      401,
      "MISSING_TENANT",
    );
    const wrong = await sendSigned(sys.baseUrl, { ...dev.signer, secret: `${dev.secret}x` }, "GET", "/v1/replays");
    expectProblem(wrong, 401, "INVALID_SIGNATURE");
    const otherTenant = await provisionTenant(sys);
    const crossed = await sendSigned(
      sys.baseUrl,
      { ...dev.signer, kid: otherTenant.signer.kid, secret: otherTenant.signer.secret },
      "GET",
      "/v1/replays",
    );
    expectProblem(crossed, 401, "INVALID_SIGNATURE", "another tenant's kid");
    const expired = await sendSigned(sys.baseUrl, dev.signer, "GET", "/v1/replays", { ts: Date.now() - 600_000 });
    expectProblem(expired, 401, "REQUEST_EXPIRED");
  });

  it("refuses a signed request replayed with the same nonce (NONCE_REUSED)", async () => {
    const nonce = randomBytes(18).toString("base64url");
    const ts = Date.now();
    const first = await sendSigned(sys.baseUrl, dev.signer, "GET", "/v1/replays", { nonce, ts });
    expect(first.status, first.text).toBe(200);
    expectProblem(await sendSigned(sys.baseUrl, dev.signer, "GET", "/v1/replays", { nonce, ts }), 401, "NONCE_REUSED");
  });

  // A recorder that goes away mid-upload (cancelled, or its process killed) is no fault of
  // ours: it was logged as an error ("rpc handler failed", ERR_STREAM_PREMATURE_CLOSE).
  it("logs a recorder that goes away mid-upload as info, never as an error", async () => {
    const t = await provisionTenant(sys);
    const tmp = join(sys.blobDir, ".tmp");
    const parts = () =>
      readdir(tmp).then(
        (names) => names.filter((n) => n.endsWith(".part")),
        () => [] as string[],
      );
    // The replays service's own port too (a recorder may call it directly), from its listening line.
    const listening = sys
      .stdout()
      .split("\n")
      .find((line) => line.includes('"service":"replays"') && line.includes("rpc server listening"));
    const replaysUrl = `http://127.0.0.1:${JSON.parse(listening as string).port}`;
    const ends = ["cancel", "kill"] as const;
    for (const [port, end] of [sys.internalUrl, replaysUrl].flatMap((url) => ends.map((e) => [url, e] as const))) {
      const { replayId } = await recordingOnNewServer(sys, t.bearer(), `gone-${end}`);
      const upload = rawUploadArchive(port, { replayId }, [randomBytes(65_536), randomBytes(65_536)]);
      await pollUntil(parts, (names) => names.length > 0, 15_000);
      upload[end]();
      await upload.closed;
      await pollUntil(parts, (names) => names.length === 0, 15_000);
      const got = await sendSigned(sys.baseUrl, t.signer, "GET", `/v1/replays/${replayId}`);
      expect(got.body).toMatchObject({ status: "recording" });
    }
    const errors = sys
      .stdout()
      .split("\n")
      .filter((line) => line.includes('"level":50'));
    expect(errors).toEqual([]);
  });

  it("SIGTERM stops the process with exit code 0", async () => {
    const codes = await sys.stop();
    expect(codes, sys.output()).toEqual([0]);
  });

  it("keeps its secrets key in DATA_DIR (0600), and no file of its database holds the signing secret in the clear", async () => {
    expect((await stat(join(dataDir, "secrets.key"))).mode & 0o777).toBe(0o600);
    const files = (await readdir(join(dataDir, "pg"), { recursive: true, withFileTypes: true })).filter((f) =>
      f.isFile(),
    );
    expect(files.length).toBeGreaterThan(100);
    const needle = Buffer.from(dev.secret, "utf8");
    for (const file of files) {
      const path = join(file.parentPath ?? (file as unknown as { path: string }).path, file.name);
      expect((await readFile(path)).includes(needle), path).toBe(false);
    }
  });

  it("a second start on the same data directory prints no secret but the dev tenant and a working key create line; the first keys keep working", async () => {
    // LOG_LEVEL=info makes the process say "ready" once everything, a dev tenant included, is done.
    sys = await startEmbeddedSystem({ DATA_DIR: dataDir, LOG_LEVEL: "info" });
    await pollUntil(async () => /"msg":"ready"/.test(sys.output()), Boolean, 30_000);
    expect(sys.output()).not.toContain("dev tenant (first start");
    expect(parseDevTenant(sys.output())).toBeUndefined();
    const servers = await send(sys.baseUrl, "GET", "/v1/api/servers", {
      headers: { authorization: `Bearer ${dev.key}` },
    });
    expect(servers.status, servers.text).toBe(200);
    expect(servers.body).toEqual({ servers: [] });
    const replays = await sendSigned(sys.baseUrl, dev.signer, "GET", "/v1/replays");
    expect(replays.status, replays.text).toBe(200);
    expect(replays.body).toEqual(EMPTY_PAGE);

    // The restart banner names the dev tenant and how to mint it a key, since the first key was shown only once.
    const out = sys.output();
    expect(out).not.toContain(dev.key);
    expect(out).not.toContain(dev.secret);
    expect(out).toMatch(new RegExp(`^\\s+tenant:\\s+${dev.tenantId}$`, "m"));
    const hint = /npx replayctl (key create --tenant .*)$/m.exec(out)?.[1];
    expect(hint, out).toBe(
      `key create --tenant ${dev.tenantId} --scopes ${ALL_SCOPES.join(",")} --member ${dev.memberId}`,
    );
    // The printed command works as printed: an all-scopes key bound to the owner, so servers writes pass too.
    const minted = await runReplayctl(sys.internalUrl, (hint as string).split(" "));
    expect(minted.code, minted.stderr).toBe(0);
    const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
      body: { name: `after-restart-${randomUUID().slice(0, 8)}` },
      headers: { authorization: `Bearer ${minted.out.key}` },
    });
    expect(created.status, created.text).toBe(201);
    expect(await sys.stop()).toEqual([0]);
  });
});
