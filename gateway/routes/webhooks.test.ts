import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { WEBHOOK_EVENTS } from "../../lib/vocabulary.js";
import { expectLikeUnknown, expectProblem } from "../../test/expect.js";
import { useInProcessSystem } from "../../test/in-process.js";
import { type RouteTenant, routeTenant } from "../../test/route-tenant.js";

// The webhook subscription and delivery routes (spec "Webhooks", decisions.md §6) on an in-process
// system: every refusal's status and code. Deliveries themselves need a receiver: test/webhooks.test.ts.

/** Accepted unresolved (decisions.md §6): no attempt is ever made to it here, as no event is sent. */
const URL_OK = "https://hooks.example.com/x";

describe("with delivery configured", () => {
  const system = useInProcessSystem();
  let t: RouteTenant;
  let other: RouteTenant;
  /** `t`'s subscription. */
  let subscriptionId: string;

  beforeAll(async () => {
    [t, other] = [await routeTenant(system()), await routeTenant(system())];
    const res = await t.signed("POST", "/v1/webhooks", { url: URL_OK, events: ["asset.ready"] });
    expect(res.status, res.text).toBe(201);
    subscriptionId = res.body.id;
  });

  describe("POST /v1/webhooks", () => {
    /** A refused create's problem, after proof that nothing was stored. */
    async function refused(body: unknown) {
      const problem = expectProblem(await refusing.signed("POST", "/v1/webhooks", body), 422, "VALIDATION_ERROR");
      expect((await refusing.signed("GET", "/v1/webhooks")).body).toEqual({ subscriptions: [] });
      return problem;
    }
    /** A tenant all of whose creates are refused. */
    let refusing: RouteTenant;
    beforeAll(async () => {
      refusing = await routeTenant(system());
    });

    it.each([
      ["http://hooks.example.com/x", /https/],
      ["https://user:pw@hooks.example.com/x", /user-info/],
      [`https://hooks.example.com/${"a".repeat(2030)}`, /2048/],
      ["https://127.0.0.1:1/x", /loopback/],
      ["https://2130706433/x", /loopback/],
      ["https://[::1]/x", /loopback/],
      ["https://[::ffff:10.0.0.1]/x", /private/],
      ["https://169.254.169.254/latest/meta-data", /link-local/],
      ["https://100.64.0.1/x", /CGNAT|shared/i],
      ["https://localhost:1/x", /loopback/],
    ])("refuses the url %s: 422 VALIDATION_ERROR for url, storing nothing", async (url, detail) => {
      const problem = await refused({ url, events: ["asset.ready"] });
      expect(problem.errors).toEqual([
        { field: "url", code: "VALIDATION_ERROR", detail: expect.stringMatching(detail) },
      ]);
    });

    it.each<[string, unknown[]]>([
      ["none", []],
      ["a repeated name", ["asset.ready", "asset.ready"]],
      ["a name in another case", ["Asset.ready"]],
      ["a name with a space", [" asset.ready"]],
      ["an unknown name", ["replay.created"]],
      ["33 names", Array<string>(33).fill("asset.ready")],
      ["a number", [1]],
    ])("refuses events of %s: 422 VALIDATION_ERROR for events, listing the valid names", async (why, events) => {
      const problem = await refused({ url: URL_OK, events });
      expect(problem.errors.map((e: { field: string }) => e.field)).toEqual(["events"]);
      if (why !== "a repeated name" && why !== "a number")
        for (const name of WEBHOOK_EVENTS) expect(JSON.stringify(problem)).toContain(name);
    });

    it("refuses fields of the wrong JSON type, naming each: 422 VALIDATION_ERROR", async () => {
      const problem = await refused({ url: 5, events: "asset.ready" });
      expect(problem.errors.map((e: { field: string }) => e.field)).toEqual(["url", "events"]);
    });

    it.each([
      ["an array", '["not", "an", "object"]'],
      ["malformed JSON", "{"],
    ])("refuses a body that is %s: 400 INVALID_BODY", async (_why, raw) => {
      expectProblem(await refusing.signed("POST", "/v1/webhooks", undefined, raw), 400, "INVALID_BODY");
    });
  });

  describe("GET /v1/webhooks", () => {
    it("lists none of another tenant's subscriptions", async () => {
      expect((await other.signed("GET", "/v1/webhooks")).body).toEqual({ subscriptions: [] });
      const mine = await t.signed("GET", "/v1/webhooks");
      expect(mine.body.subscriptions.map((s: { id: string }) => s.id)).toEqual([subscriptionId]);
    });
  });

  describe("DELETE /v1/webhooks/{id}", () => {
    it.each(["not-a-uuid", randomUUID()])("answers the id %s with 404 SUBSCRIPTION_NOT_FOUND", async (id) => {
      expectProblem(await t.signed("DELETE", `/v1/webhooks/${id}`), 404, "SUBSCRIPTION_NOT_FOUND");
    });

    it("answers another tenant's subscription as an unknown one, deleting nothing", async () => {
      const unknown = randomUUID();
      const remove = (id: string) => other.signed("DELETE", `/v1/webhooks/${id}`);
      const [theirs, none] = [await remove(subscriptionId), await remove(unknown)];
      expectLikeUnknown(theirs, subscriptionId, none, unknown, 404, "SUBSCRIPTION_NOT_FOUND");
      expect((await t.signed("GET", "/v1/webhooks")).body.subscriptions).toHaveLength(1);
    });
  });

  describe("GET /v1/webhooks/{id}/deliveries", () => {
    it.each(["0", "101", "-1", "abc", "5&page_size=5"])("refuses page_size=%s: 400 INVALID_PAGE_SIZE", async (size) => {
      const res = await t.signed("GET", `/v1/webhooks/${subscriptionId}/deliveries?page_size=${size}`);
      expectProblem(res, 400, "INVALID_PAGE_SIZE");
    });

    it.each(["abc", "AQ"])("refuses page_token=%s: 400 INVALID_PAGE_TOKEN", async (token) => {
      const res = await t.signed("GET", `/v1/webhooks/${subscriptionId}/deliveries?page_token=${token}`);
      expectProblem(res, 400, "INVALID_PAGE_TOKEN");
    });

    it("answers an unknown subscription, and another tenant's as an unknown one, with 404 SUBSCRIPTION_NOT_FOUND", async () => {
      const unknown = randomUUID();
      expectProblem(await t.signed("GET", `/v1/webhooks/${unknown}/deliveries`), 404, "SUBSCRIPTION_NOT_FOUND");
      const list = (id: string) => other.signed("GET", `/v1/webhooks/${id}/deliveries`);
      const [theirs, none] = [await list(subscriptionId), await list(unknown)];
      expectLikeUnknown(theirs, subscriptionId, none, unknown, 404, "SUBSCRIPTION_NOT_FOUND");
    });
  });

  describe("GET /v1/webhooks/deliveries/{id}", () => {
    it.each(["not-a-uuid", randomUUID()])("answers the id %s with 404 DELIVERY_NOT_FOUND", async (id) => {
      expectProblem(await t.signed("GET", `/v1/webhooks/deliveries/${id}`), 404, "DELIVERY_NOT_FOUND");
    });
  });

  describe("POST /v1/webhooks/deliveries/{id}/replay", () => {
    it.each(["not-a-uuid", randomUUID()])("answers the id %s with 404 DELIVERY_NOT_FOUND", async (id) => {
      expectProblem(await t.api("POST", `/v1/webhooks/deliveries/${id}/replay`), 404, "DELIVERY_NOT_FOUND");
    });

    it("refuses a key without collections:write: 403 INSUFFICIENT_SCOPE naming it", async () => {
      for (const key of [await t.keyWithout("collections:write"), (await t.mintKey(["replays:read"])).key]) {
        const res = await t.api("POST", `/v1/webhooks/deliveries/${randomUUID()}/replay`, { key });
        expect(expectProblem(res, 403, "INSUFFICIENT_SCOPE").detail).toContain("collections:write");
      }
    });
  });
});

describe("with WEBHOOK_DELIVERY=off", () => {
  const system = useInProcessSystem({ WEBHOOK_DELIVERY: "off" });

  it.each([[{ url: URL_OK, events: ["asset.ready"] }], [{ url: "http://127.0.0.1/x", events: ["nope"] }]])(
    "refuses the subscription %j with 503 WEBHOOK_DELIVERY_UNCONFIGURED before any other check, storing nothing",
    async (body) => {
      const t = await routeTenant(system());
      expectProblem(await t.signed("POST", "/v1/webhooks", body), 503, "WEBHOOK_DELIVERY_UNCONFIGURED");
      expect((await t.signed("GET", "/v1/webhooks")).body).toEqual({ subscriptions: [] });
    },
  );
});
