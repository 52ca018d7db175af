import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDbModes } from "../../lib/db/_testing.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { openSecrets } from "../../lib/secrets/_testing.js";
import { createSecretBox } from "../../lib/secrets/box.js";
import { signRequest } from "../../lib/signing.js";
import { deleteNoncesExpired, insertSigningKey, insertTenant } from "../identity/store.js";
import { createAuthenticator, SIGNATURE_WINDOW_MS } from "./authenticate.js";
import { createKeyCache } from "./key-cache.js";

// The signature check against a real identity schema, on a clock the test moves.

describe.each(testDbModes())("signed requests ($name database)", ({ open }) => {
  let db: Db;
  let dispose: () => Promise<void>;
  const tenant = randomUUID();
  const kid = `kid_${randomUUID().slice(0, 8)}`;
  const secret = "s".repeat(43);
  beforeAll(async () => {
    const testDb = await open("identity");
    db = testDb.db;
    dispose = async () => await testDb[Symbol.asyncDispose]();
    await db.transaction((tx) =>
      insertTenant(tx, tenant, {
        name: "t",
        serverLimit: 1,
        storageQuotaBytes: 1,
        rateLimitRps: 1,
        rateLimitBurst: 1,
        retentionDays: 30,
        hotDays: 7,
      }),
    );
    await insertSigningKey(db, kid, tenant, openSecrets.seal(secret));
  });
  afterAll(() => dispose());

  const T = Date.parse("2026-11-28T00:00:00Z");
  let clock = T;
  const authenticator = () =>
    createAuthenticator({ db, keyCache: createKeyCache(), now: () => clock, secrets: openSecrets });
  const verify = (target: string, opts: { ts: number; nonce: string }, using = authenticator()) => {
    const signed = signRequest({ tenant, kid, secret, method: "GET", url: `http://gw${target}`, ...opts });
    const at = target.indexOf("?");
    return using.signature({
      authorization: signed.authorization,
      method: "GET",
      path: at === -1 ? target : target.slice(0, at),
      rawQuery: at === -1 ? "" : target.slice(at + 1),
      body: undefined,
    });
  };
  const codeOf = (promise: Promise<unknown>) =>
    promise.then(
      () => "ok",
      (err) => (err instanceof DomainError ? err.code : String(err)),
    );

  it("keeps a nonce a whole window from when it was used, even when its ts was near the window's edge", async () => {
    clock = T;
    const nonce = `n_${randomUUID().replaceAll("-", "")}`;
    // A client 290 s behind: accepted, and its nonce must outlive the sweep of 20 s later.
    expect(await codeOf(verify("/v1/replays", { ts: T - 290_000, nonce }))).toBe("ok");
    clock = T + 20_000;
    await deleteNoncesExpired(db, new Date(clock), 100);
    expect(await codeOf(verify("/v1/replays", { ts: clock, nonce }))).toBe("NONCE_REUSED");
    // And it goes once a window has passed since its use.
    clock = T + SIGNATURE_WINDOW_MS + 2_000;
    await deleteNoncesExpired(db, new Date(clock), 100);
    expect(await codeOf(verify("/v1/replays", { ts: clock, nonce }))).toBe("ok");
  });

  it("refuses a correct signature as INVALID_SIGNATURE when the key's secret is sealed under a SECRETS_KEY it lacks", async () => {
    clock = T;
    const elsewhere = createAuthenticator({
      db,
      keyCache: createKeyCache(),
      now: () => clock,
      secrets: createSecretBox(randomBytes(32)),
    });
    const nonce = `n_${randomUUID().replaceAll("-", "")}`;
    expect(await codeOf(verify("/v1/replays", { ts: T, nonce }, elsewhere))).toBe("INVALID_SIGNATURE");
    expect(await codeOf(verify("/v1/replays", { ts: T, nonce }))).toBe("ok");
  });

  it('signs the query as sent after the first "?", a second "?" included', async () => {
    clock = T;
    const nonce = () => `n_${randomUUID().replaceAll("-", "")}`;
    expect(await codeOf(verify("/v1/replays??page_size=3", { ts: T, nonce: nonce() }))).toBe("ok");
    expect(await codeOf(verify("/v1/replays?page_size=3", { ts: T, nonce: nonce() }))).toBe("ok");
    expect(await codeOf(verify("/v1/replays?", { ts: T, nonce: nonce() }))).toBe("ok");
  });
});
