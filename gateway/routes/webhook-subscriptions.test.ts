import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { expectLikeUnknown, expectProblem } from "../../test/expect.js";
import { useInProcessSystem } from "../../test/in-process.js";
import { type RouteTenant, routeTenant } from "../../test/route-tenant.js";

// Managing a webhook subscription (decisions.md §6.1) on an in-process system: every refusal's
// status and code. What the changes do to deliveries: test/webhook-subscriptions.test.ts.

const system = useInProcessSystem();
let t: RouteTenant;
let other: RouteTenant;
let id: string;
/** The subscription as GET answers it before any refused change. */
let record: unknown;

beforeAll(async () => {
  [t, other] = [await routeTenant(system()), await routeTenant(system())];
  const res = await t.signed("POST", "/v1/webhooks", { url: "https://hooks.example.com/x", events: ["asset.ready"] });
  expect(res.status, res.text).toBe(201);
  id = res.body.id;
  record = (await t.signed("GET", `/v1/webhooks/${id}`)).body;
});

/** Asserts 422 VALIDATION_ERROR with an errors[] entry naming `field`; returns the problem. */
async function expectViolation(method: string, path: string, body: unknown, field: string) {
  const res = await t.signed(method, path, body);
  const problem = expectProblem(res, 422, "VALIDATION_ERROR", JSON.stringify(body));
  expect(
    problem.errors.map((e: { field: string }) => e.field),
    res.text,
  ).toContain(field);
  return problem;
}

describe.each<[string, string, unknown]>([
  ["GET", "/v1/webhooks/{id}", undefined],
  ["PATCH", "/v1/webhooks/{id}", { disabled: true }],
  ["POST", "/v1/webhooks/{id}/rotate-secret", { since: new Date().toISOString() }],
  ["POST", "/v1/webhooks/{id}/recover", { since: new Date().toISOString() }],
  ["GET", "/v1/webhooks/{id}/stats", undefined],
])("%s %s", (method, path, body) => {
  it.each(["not-an-id", randomUUID()])("answers the id %s with 404 SUBSCRIPTION_NOT_FOUND", async (unknown) => {
    expectProblem(await t.signed(method, path.replace("{id}", unknown), body), 404, "SUBSCRIPTION_NOT_FOUND");
  });

  it("answers another tenant's subscription as an unknown one, changing nothing", async () => {
    const unknown = randomUUID();
    const send = (target: string) => other.signed(method, path.replace("{id}", target), body);
    expectLikeUnknown(await send(id), id, await send(unknown), unknown, 404, "SUBSCRIPTION_NOT_FOUND");
    expect((await t.signed("GET", `/v1/webhooks/${id}`)).body).toEqual(record);
  });
});

describe("PATCH /v1/webhooks/{id}", () => {
  it.each<[string, string, unknown]>([
    ["an empty body", "body", {}],
    ["an unknown field", "colour", { colour: "blue" }],
    ["an http url", "url", { url: "http://example.com/hook" }],
    ["a url that is a number", "url", { url: 42 }],
    ["a null url", "url", { url: null }],
    ["an unknown event", "events", { events: ["collection.finalised"] }],
    ["no events", "events", { events: [] }],
    ["disabled that is a string", "disabled", { disabled: "yes" }],
    ["a rate limit of 0", "rateLimitPerSecond", { rateLimitPerSecond: 0 }],
    ["a rate limit of 10 001", "rateLimitPerSecond", { rateLimitPerSecond: 10_001 }],
    ["a fractional rate limit", "rateLimitPerSecond", { rateLimitPerSecond: 1.5 }],
    ["a rate limit that is a string", "rateLimitPerSecond", { rateLimitPerSecond: "5" }],
    ["a rate limit of 2^40", "rateLimitPerSecond", { rateLimitPerSecond: 2 ** 40 }],
  ])("refuses %s: 422 VALIDATION_ERROR naming %s, changing nothing", async (_why, field, body) => {
    await expectViolation("PATCH", `/v1/webhooks/${id}`, body, field);
    expect((await t.signed("GET", `/v1/webhooks/${id}`)).body).toEqual(record);
  });

  it("refuses a body that is not a JSON object: 400 INVALID_BODY", async () => {
    expectProblem(await t.signed("PATCH", `/v1/webhooks/${id}`, undefined, "[]"), 400, "INVALID_BODY");
  });
});

describe("POST /v1/webhooks/{id}/rotate-secret", () => {
  it.each([-1, 604_801, "60", 1.5])("refuses graceSeconds %j: 422 VALIDATION_ERROR naming it", async (grace) => {
    const problem = await expectViolation(
      "POST",
      `/v1/webhooks/${id}/rotate-secret`,
      { graceSeconds: grace },
      "graceSeconds",
    );
    expect(problem.errors[0].field).toBe("graceSeconds");
    expect((await t.signed("GET", `/v1/webhooks/${id}`)).body).toEqual(record);
  });

  it.each(["{", "[]"])("refuses the body %j: 400 INVALID_BODY", async (raw) => {
    expectProblem(await t.signed("POST", `/v1/webhooks/${id}/rotate-secret`, undefined, raw), 400, "INVALID_BODY");
  });
});

describe("POST /v1/webhooks/{id}/recover", () => {
  const hour = 3_600_000;
  const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
  it.each<[string, string, () => unknown]>([
    ["no since", "since", () => ({})],
    ["a since that is no time", "since", () => ({ since: "yesterday" })],
    ["a since in the future", "since", () => ({ since: at(hour) })],
    ["a since before the delivery log's retention (30 days)", "since", () => ({ since: at(-31 * 24 * hour) })],
    ["a since after the until", "since", () => ({ since: at(-60_000), until: at(-hour) })],
    ["an until that is no time", "until", () => ({ since: at(-60_000), until: "2026-13-01T00:00:00Z" })],
  ])("refuses %s: 422 VALIDATION_ERROR naming %s", async (_why, field, body) => {
    await expectViolation("POST", `/v1/webhooks/${id}/recover`, body(), field);
  });

  it.each(["{", "[]", ""])("refuses the body %j: 400 INVALID_BODY", async (raw) => {
    expectProblem(await t.signed("POST", `/v1/webhooks/${id}/recover`, undefined, raw), 400, "INVALID_BODY");
  });
});
