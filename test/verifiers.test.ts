// The webhook verifiers and the request signer for readers who do not use TypeScript: Python's
// (examples/verify_webhook.py, examples/sign_request.py) and Go's (examples/verifywebhook/main.go),
// standard library only. Each is shown verbatim in docs/webhooks.md or docs/signing.md, and run on
// what a running system really sends and accepts: a delivery its worker made, and the gateway's
// verdict on signed requests. .ci/run installs python3 and golang-go; without them, outside CI, the
// tests are skipped with their reason. The client package's verifyWebhook runs the same cases as one
// more verifier (test/client-webhooks.test.ts has it on all eight events).
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { verifyWebhook } from "@replay/client";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { webhookSignature } from "../services/webhooks/delivery/signature.js";
import { expectProblem } from "./expect.js";
import { provisionTenant, type Signer, send, sendSigned } from "./http.js";
import { recordingOnNewServer } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const PYTHON = "/usr/bin/python3";
const GO = "/usr/bin/go";
const PY_VERIFIER = "examples/verify_webhook.py";
const GO_VERIFIER = "examples/verifywebhook/main.go";
const PY_SIGNER = "examples/sign_request.py";

const noPython = !existsSync(PYTHON);
const noGo = !existsSync(GO);
if ((noPython || noGo) && process.env.CI)
  throw new Error(`CI needs ${PYTHON} and ${GO} for the verifier examples' test (apt-get install python3 golang-go)`);

type Run = { code: number; stdout: string; stderr: string };

/** Runs a command with only the environment given (and PATH); never rejects on a non-zero exit. */
function run(file: string, args: string[], env: Record<string, string>, stdin?: Buffer): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      // No __pycache__ left in examples/ by the signer test's import.
      { cwd: root, env: { PATH: process.env.PATH ?? "", PYTHONDONTWRITEBYTECODE: "1", ...env }, timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== "number") return reject(err);
        resolve({ code: typeof err?.code === "number" ? err.code : 0, stdout, stderr });
      },
    );
    child.stdin?.end(stdin ?? Buffer.alloc(0));
  });
}

/** The contents of every fenced block of a language in a Markdown text, each with its final newline. */
function blocks(markdown: string, language: string): string[] {
  return [...markdown.matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map(
    (m) => m[1] as string,
  );
}

describe("the docs show the Python and Go examples verbatim", () => {
  const file = (path: string) => readFileSync(join(root, path), "utf8");
  it.each([
    [PY_VERIFIER, "docs/webhooks.md", "python"],
    [GO_VERIFIER, "docs/webhooks.md", "go"],
    [PY_SIGNER, "docs/signing.md", "python"],
  ])("%s in %s", (example, doc, language) => {
    expect(blocks(file(doc), language)).toContain(file(example));
  });
});

/** The verifiers, each answering as a command: `verified` and exit 0, or `refused` and exit 1. */
type Verifier = {
  title: string;
  missing: boolean;
  verify(delivery: Delivery): Promise<Run>;
};

// Go builds once in beforeAll. A cold build of this file took 0.3 s here (Debian's Go 1.19 ships
// its standard library prebuilt; a newer Go compiles it into the cache first). The cache lives under
// node_modules/.cache so that it works as root in CI, whatever $HOME is.
const goCache = join(root, "node_modules", ".cache", "verifiers-go");
const goBinary = join(tmpdir(), `verifywebhook-${process.pid}`);
const goEnv = { GOCACHE: join(goCache, "build"), GOPATH: join(goCache, "path") };

const verifiers: Verifier[] = [
  {
    title: `${PY_VERIFIER}${noPython ? ` (skipped: no ${PYTHON})` : ""}`,
    missing: noPython,
    verify: (d) =>
      run(PYTHON, [PY_VERIFIER, d.ts, d.sig, ...(d.next ? [d.next] : [])], { WEBHOOK_SECRET: d.secret }, d.raw),
  },
  {
    title: `${GO_VERIFIER}${noGo ? ` (skipped: no ${GO})` : ""}`,
    missing: noGo,
    verify: (d) => run(goBinary, [d.ts, d.sig, ...(d.next ? [d.next] : [])], { WEBHOOK_SECRET: d.secret }, d.raw),
  },
  {
    title: "@replay/client verifyWebhook",
    missing: false,
    // In process, answered as the commands answer; a refusal's reason goes where their stderr does.
    verify: async (d) => {
      const headers = { "x-fv-timestamp": d.ts, "x-fv-signature": d.sig, "x-fv-signature-next": d.next };
      const result = verifyWebhook(d.raw, headers, d.secret.split(","));
      return result.ok
        ? { code: 0, stdout: "verified\n", stderr: "" }
        : { code: 1, stdout: "refused\n", stderr: result.reason };
    },
  },
];

beforeAll(async () => {
  if (noGo) return;
  mkdirSync(goCache, { recursive: true });
  const built = await run(GO, ["build", "-o", goBinary, GO_VERIFIER], goEnv);
  expect(built.code, built.stderr).toBe(0);
}, 180_000);
afterAll(() => rmSync(goBinary, { force: true }));

describe.each(sharedSystems())("$mode system: a real delivery", (sys) => {
  let receiver: WebhookReceiver;
  let delivery: Delivery;
  let overlap: Delivery & { previous: string; rotated: string };
  beforeAll(async () => {
    receiver = await startWebhookReceiver({
      port: inject("webhookReceiver").verifiersPort,
      certDir: inject("webhookReceiver").certDir,
    });
    delivery = await realDelivery(sys, receiver);
    overlap = await deliveryAfterRotation(sys, receiver, delivery);
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
  });

  describe.each(verifiers)("$title", (verifier) => {
    it.skipIf(verifier.missing)("accepts it", async () => {
      const r = await verifier.verify(delivery);
      expect(r, r.stderr).toMatchObject(VERIFIED);
    });

    it.skipIf(verifier.missing)("refuses it with one bit of the body changed", async () => {
      const raw = Buffer.from(delivery.raw);
      raw[raw.length - 2] ^= 1;
      const r = await verifier.verify({ ...delivery, raw });
      expect(r, r.stderr).toMatchObject(REFUSED);
    });

    it.skipIf(verifier.missing)("refuses it under another secret", async () => {
      const r = await verifier.verify({ ...delivery, secret: `whsec_${"A".repeat(43)}` });
      expect(r, r.stderr).toMatchObject(REFUSED);
    });

    it.skipIf(verifier.missing)(
      "during a rotation's overlap accepts one with the new secret, the old or both, and refuses it with neither",
      async () => {
        expect(overlap.next).toMatch(/^sha256=[0-9a-f]{64}$/);
        for (const secret of [`${overlap.rotated},${overlap.previous}`, overlap.rotated, overlap.previous]) {
          const r = await verifier.verify({ ...overlap, secret });
          expect(r, `${secret}: ${r.stderr}`).toMatchObject(VERIFIED);
        }
        const neither = await verifier.verify({
          ...overlap,
          secret: `whsec_${"A".repeat(43)},whsec_${"B".repeat(43)}`,
        });
        expect(neither, neither.stderr).toMatchObject(REFUSED);
        // Without X-FV-Signature-Next the new secret alone cannot verify it.
        const withoutNext = await verifier.verify({ ...overlap, next: undefined, secret: overlap.rotated });
        expect(withoutNext, withoutNext.stderr).toMatchObject(REFUSED);
      },
    );

    it.skipIf(verifier.missing)("refuses it correctly signed with a timestamp 301 s old", async () => {
      const stale = await verifier.verify(signedAt(delivery, Number(delivery.ts) - 301));
      expect(stale, stale.stderr).toMatchObject(REFUSED);
      // The same body signed now passes: only the age was refused.
      const now = await verifier.verify(signedAt(delivery, Math.floor(Date.now() / 1000)));
      expect(now, now.stderr).toMatchObject(VERIFIED);
    });
  });
});

const VERIFIED = { code: 0, stdout: "verified\n" };
const REFUSED = { code: 1, stdout: "refused\n" };

/** The delivery's body and secret with X-FV-Timestamp and X-FV-Signature made for another time. */
function signedAt(delivery: Delivery, timestampS: number): Delivery {
  return { ...delivery, ts: String(timestampS), sig: webhookSignature(delivery.secret, timestampS, delivery.raw) };
}

/**
 * What a receiver got: the raw body and the headers (X-FV-Signature-Next during a rotation's
 * overlap), with the secrets it holds, comma-separated as WEBHOOK_SECRET takes them.
 */
type Delivery = { secret: string; raw: Buffer; ts: string; sig: string; next?: string };

/** Subscribes the receiver and finishes a replay: the raw body and headers of the delivery it got. */
async function realDelivery(
  sys: ReturnType<typeof sharedSystems>[number],
  receiver: WebhookReceiver,
): Promise<Delivery> {
  const t = await provisionTenant(sys);
  const path = receiver.newPath();
  const created = await sendSigned(sys.baseUrl, t.signer, "POST", "/v1/webhooks", {
    body: { url: receiver.url(path), events: ["collection.finalized"] },
  });
  expect(created.status, created.text).toBe(201);
  const context = { sys, t, path, subscriptionId: created.body.id as string };
  contexts.set(created.body.secret, context);
  return { secret: created.body.secret, ...(await nextDelivery(context, receiver)) };
}

/** Where realDelivery subscribed, by its secret: deliveryAfterRotation goes on from there. */
const contexts = new Map<
  string,
  {
    sys: ReturnType<typeof sharedSystems>[number];
    t: Awaited<ReturnType<typeof provisionTenant>>;
    path: string;
    subscriptionId: string;
  }
>();

/** Finishes one more replay: the raw body and headers of the delivery it makes. */
async function nextDelivery(
  {
    sys,
    t,
    path,
  }: { sys: ReturnType<typeof sharedSystems>[number]; t: Awaited<ReturnType<typeof provisionTenant>>; path: string },
  receiver: WebhookReceiver,
): Promise<Omit<Delivery, "secret">> {
  const before = receiver.requests(path).length;
  const { replayId } = await recordingOnNewServer(sys, t.bearer(), "verifiers");
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  await recording.finishRecording({ replayId });
  const got = (await receiver.waitForRequests(path, before + 1, 30_000))[before];
  if (!got) throw new Error("no delivery");
  // Unix seconds (10 digits until 2286), where request signing's ts is milliseconds.
  expect(got.headers["x-fv-timestamp"]).toMatch(/^\d{10}$/);
  const next = got.headers["x-fv-signature-next"];
  return {
    raw: got.raw,
    ts: String(got.headers["x-fv-timestamp"]),
    sig: String(got.headers["x-fv-signature"]),
    ...(typeof next === "string" ? { next } : {}),
  };
}

/** Rotates the subscription's secret with an overlap: a delivery made during it, with both secrets. */
async function deliveryAfterRotation(
  sys: ReturnType<typeof sharedSystems>[number],
  receiver: WebhookReceiver,
  first: Delivery,
): Promise<Delivery & { previous: string; rotated: string }> {
  const context = contexts.get(first.secret);
  if (!context) throw new Error("no subscription for that delivery");
  const rotated = await sendSigned(
    sys.baseUrl,
    context.t.signer,
    "POST",
    `/v1/webhooks/${context.subscriptionId}/rotate-secret`,
    {
      body: { graceSeconds: 600 },
    },
  );
  expect(rotated.status, rotated.text).toBe(200);
  const got = await nextDelivery(context, receiver);
  return { ...got, secret: first.secret, previous: first.secret, rotated: rotated.body.secret };
}

// Requests the gateway must accept, each signed and sent by the Python file: repeated names, a
// literal "+", empty values, a name without "=", an empty part, non-ASCII names and values, and
// names whose byte order differs from their decoded order (é after z decoded, before Z encoded).
const SIGNED_GETS = [
  "/v1/replays?page_size=5",
  "/v1/replays?integration=a+b&integration=&page_size=5&integration=a%2Bb",
  "/v1/replays?z=1&%C3%A9t%C3%A9=%E2%9C%93&Z=2&flag&&b=&integration=%F0%9F%8E%AE%20x",
];

describe.skipIf(noPython)(`${PY_SIGNER}${noPython ? ` (skipped: no ${PYTHON})` : ""}`, () => {
  describe.each(sharedSystems())("$mode system", (sys) => {
    let signer: Signer;
    beforeAll(async () => {
      signer = (await provisionTenant(sys)).signer;
    });
    const signerEnv = () => ({ TENANT_ID: signer.tenant, KID: signer.kid, SECRET: signer.secret });

    it.each(SIGNED_GETS)("a signed GET %s is answered 200", async (path) => {
      const r = await run(PYTHON, [PY_SIGNER, "GET", sys.baseUrl + path], signerEnv());
      expect(r, r.stderr).toMatchObject({ code: 0, stdout: expect.stringMatching(/^200 \{"results":\[/) });
    });

    it("a signed POST /v1/webhooks with a JSON body is answered 201", async () => {
      const url = `https://127.0.0.1:${inject("webhookReceiver").verifiersPort}/signed/${signer.tenant}`;
      const body = JSON.stringify({ url: `${url}?by=python-✓`, events: ["asset.ready"] }); // UTF-8 bytes hashed
      const r = await run(PYTHON, [PY_SIGNER, "POST", `${sys.baseUrl}/v1/webhooks`, body], signerEnv());
      expect(r, r.stderr).toMatchObject({ code: 0, stdout: expect.stringMatching(/^201 \{/) });
    });

    it("its Authorization on a changed query is INVALID_SIGNATURE, on the signed one 200", async () => {
      const path = "/v1/replays?integration=a+b&page_size=5";
      const code =
        "import sys; sys.path.insert(0, 'examples'); import sign_request as s; print(s.authorization(*sys.argv[1:]))";
      const made = await run(
        PYTHON,
        ["-c", code, signer.tenant, signer.kid, signer.secret, "GET", sys.baseUrl + path],
        {},
      );
      expect(made.code, made.stderr).toBe(0);
      const headers = { authorization: made.stdout.trim() };
      // "+" and "%20" differ: a client or proxy that turns one into the other breaks the signature.
      const tampered = await send(sys.baseUrl, "GET", path.replace("+", "%20"), { headers });
      expectProblem(tampered, 401, "INVALID_SIGNATURE");
      const signed = await send(sys.baseUrl, "GET", path, { headers });
      expect(signed.status, signed.text).toBe(200);
    });
  });
});
