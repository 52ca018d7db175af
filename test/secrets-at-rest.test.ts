import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { verifyWebhookSignature } from "../services/webhooks/delivery/signature.js";
import { provisionTenant, sendSigned } from "./http.js";
import { runReplayctl } from "./replayctl.js";
import { sharedSystems } from "./shared-system.js";
import { startWebhookReceiver } from "./webhook-receiver.js";
import { tenantOn } from "./webhook-tenant.js";

// Secrets at rest (decisions.md §6.1) on the distributed system's own database: a dump holds no
// webhook or signing secret in the clear, and a clear-text secret from before encryption (the
// upgrade) is sealed by `replayctl secrets reencrypt` without its subscription breaking.

const run = promisify(execFile);

describe.each(sharedSystems().filter((s) => s.databaseUrl !== undefined))("secrets at rest ($mode mode)", (sys) => {
  const databaseUrl = sys.databaseUrl as string;

  it("a pg_dump of the database holds neither a subscription's secret nor a signing key's", async () => {
    const t = await provisionTenant(sys);
    const created = await sendSigned(sys.baseUrl, t.signer, "POST", "/v1/webhooks", {
      body: { url: "https://hooks.replay.invalid/in", events: ["asset.ready"] },
    });
    expect(created.status, created.text).toBe(201);
    const rotated = await sendSigned(sys.baseUrl, t.signer, "POST", `/v1/webhooks/${created.body.id}/rotate-secret`, {
      body: { graceSeconds: 600 },
    });
    expect(rotated.status, rotated.text).toBe(200);
    const { stdout: dump } = await run("pg_dump", ["--data-only", databaseUrl], { maxBuffer: 512 * 1024 * 1024 });
    expect(dump).toContain(created.body.id); // the subscription is in it
    for (const secret of [created.body.secret, rotated.body.secret, t.signer.secret]) {
      expect(dump.includes(secret), "a secret in the clear").toBe(false);
      // Nor its random part in any encoding the dump might use.
      expect(dump.includes(secret.slice(6, 30))).toBe(false);
    }
  });

  it("seals clear-text secrets from before encryption: the subscription's deliveries still verify, the signing key still signs", async () => {
    const { secretsPort, certDir } = inject("webhookReceiver");
    const receiver = await startWebhookReceiver({ port: secretsPort, certDir });
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const t = await tenantOn(sys);
      const path = receiver.newPath();
      const { id } = await t.subscribe(receiver.url(path), ["collection.finalized"]);
      // As the upgrade finds them: the subscription's and the tenant's signing key's secrets in the clear.
      const clear = `whsec_${randomBytes(32).toString("base64url")}`;
      await client.query("UPDATE webhooks.subscription SET secret = $2 WHERE subscription_id = $1", [id, clear]);
      await client.query("UPDATE identity.signing_key SET secret = $2 WHERE kid = $1", [t.signer.kid, t.signer.secret]);
      expect((await t.signed("GET", "/v1/webhooks")).status).toBe(200);
      const cli = await runReplayctl(sys.internalUrl, ["secrets", "reencrypt"]);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.out.resealed["webhooks.subscription"]).toBeGreaterThanOrEqual(1);
      expect(cli.out.resealed["identity.signing_key"]).toBeGreaterThanOrEqual(1);
      expect(cli.out.unreadable).toEqual({ "identity.signing_key": 0, "webhooks.subscription": 0 });
      const { rows } = await client.query<{ secret: string }>(
        "SELECT secret FROM webhooks.subscription WHERE subscription_id = $1",
        [id],
      );
      expect(rows[0]?.secret).toMatch(/^enc1:[0-9a-f]{8}:/);
      const { rows: keys } = await client.query<{ secret: string }>(
        "SELECT secret FROM identity.signing_key WHERE kid = $1",
        [t.signer.kid],
      );
      expect(keys[0]?.secret).toMatch(/^enc1:[0-9a-f]{8}:/);
      // The signing key still signs: its requests are accepted as before.
      expect((await t.signed("GET", "/v1/webhooks")).status).toBe(200);
      const again = await runReplayctl(sys.internalUrl, ["secrets", "reencrypt"]);
      expect(again.out.resealed).toEqual({ "identity.signing_key": 0, "webhooks.subscription": 0 });

      await t.finishedReplay();
      const [delivery] = await receiver.waitForRequests(path, 1);
      expect(verifyWebhookSignature(clear, delivery?.headers ?? {}, delivery?.raw ?? "")).toBe(true);
    } finally {
      await client.end();
      await receiver.close();
    }
  });
});
