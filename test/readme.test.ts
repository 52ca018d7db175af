// The docs' examples are what a user without TypeScript runs: the README's request-signing example
// must be the file examples/sign-request.mjs word for word, docs/webhooks.md's receiver the file
// examples/webhook-receiver.mjs, and each file, run by plain `node`, must do what the text says.
import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, inject, it, onTestFinished } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { webhookSignature } from "../services/webhooks/delivery/signature.js";
import { provisionTenant, send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const EXAMPLE = "examples/sign-request.mjs";

/** The contents of every ```js fenced block in a Markdown text, each with its final newline. */
function jsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

describe("docs/signing.md: signing a request", () => {
  it(`shows ${EXAMPLE} verbatim`, () => {
    const example = readFileSync(join(root, EXAMPLE), "utf8");
    const blocks = jsBlocks(readFileSync(join(root, "docs", "signing.md"), "utf8"));
    expect(blocks, "a ```js block in docs/signing.md that is the example file").toContain(example);
  });

  describe.each(sharedSystems())("$mode system", (sys) => {
    it("the example, run with plain node, gets 200 for a signed GET /v1/replays", async () => {
      const tenant = await provisionTenant(sys);
      const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? "",
          REPLAY_URL: sys.baseUrl,
          TENANT_ID: tenant.signer.tenant,
          KID: tenant.signer.kid,
          SECRET: tenant.signer.secret,
        },
        timeout: 20_000,
      });
      expect(stdout).toMatch(/^200 \{"results":\[\],/);
    });
  });
});

const RECEIVER = "examples/webhook-receiver.mjs";

describe("docs/webhooks.md: a webhook receiver", () => {
  it(`shows ${RECEIVER} verbatim`, () => {
    const example = readFileSync(join(root, RECEIVER), "utf8");
    expect(jsBlocks(readFileSync(join(root, "docs", "webhooks.md"), "utf8"))).toContain(example);
  });

  describe.each(sharedSystems())("$mode system", (sys) => {
    it("the example, run with plain node, verifies a real delivery and refuses a forged one", async () => {
      const { certDir, examplePort } = inject("webhookReceiver");
      const t = await provisionTenant(sys);
      const url = `https://127.0.0.1:${examplePort}/hooks/${t.tenantId}`;
      const created = await sendSigned(sys.baseUrl, t.signer, "POST", "/v1/webhooks", {
        body: { url, events: ["collection.finalized"] },
      });
      expect(created.status, created.text).toBe(201);
      const child = spawn(process.execPath, [RECEIVER], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? "",
          WEBHOOK_SECRET: created.body.secret,
          TLS_CERT: join(certDir, "cert.pem"),
          TLS_KEY: join(certDir, "key.pem"),
          PORT: String(examplePort),
        },
      });
      let printed = "";
      child.stdout.on("data", (chunk: Buffer) => {
        printed += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        printed += chunk.toString();
      });
      onTestFinished(() => {
        child.kill();
      });

      // A forged delivery (wrong secret) gets 401; the example is up once it answers.
      const body = JSON.stringify({ event_id: "forged", event: "asset.ready" });
      const ts = Math.floor(Date.now() / 1000);
      const forged = await pollUntil(
        () =>
          postToExample(url, body, {
            "x-fv-timestamp": String(ts),
            "x-fv-signature": webhookSignature("whsec_wrong", ts, body),
          }),
        (status) => status !== 0,
        10_000,
      );
      expect(forged, printed).toBe(401);

      const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
      const server = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: t.bearer(),
        body: { name: "example" },
      });
      await grpcCheckIn(sys.internalUrl, server.body.serverId);
      const started = await pollUntil(
        () => recording.startRecording({ serverId: server.body.serverId }).catch((err) => ConnectError.from(err)),
        (r) => !(r instanceof ConnectError),
        10_000,
      );
      await recording.finishRecording({ replayId: (started as { replayId: string }).replayId });
      await pollUntil(
        async () => printed,
        (text) => /^collection\.finalized [0-9a-f-]{36}$/m.test(text),
        15_000,
      );
      expect(printed).not.toContain("forged");
    });
  });
});

/** A POST to the example receiver, trusting its test certificate; 0 while nothing answers yet. */
async function postToExample(url: string, body: string, headers: Record<string, string>): Promise<number> {
  const ca = readFileSync(join(inject("webhookReceiver").certDir, "cert.pem"));
  return new Promise((resolve) => {
    const req = request(
      url,
      { method: "POST", ca, headers: { "content-type": "application/json", ...headers } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", () => resolve(0));
    req.end(body);
  });
}
