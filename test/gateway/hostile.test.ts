// A hostile-request generator, kept as a test: seeded random requests to every public
// route (valid-ish and mutated bodies, query values, path ids, headers, methods, credentials) with a
// provisioned tenant's valid key, so that authenticated paths are reached. Any 5xx (but a 501 from
// a route not built yet), an error that is not problem+json, or a missing X-Request-Id fails it,
// printing the request so it can be replayed. HOSTILE_SEED replays a run, HOSTILE_COUNT sets its size.

import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { publicRoutes } from "../../gateway/routes/table.js";
import { ActorSchema, MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import { trustedHeaders } from "../../lib/rpc/context.js";
import { provisionTenant, send } from "../http.js";
import { grpcCheckIn } from "../recorder.js";
import { oneSharedSystem } from "../shared-system.js";
import { contractViolations, describeFailure, sendHostile } from "./hostile/check.js";
import { connectInternal, hostileInternalCall, type InternalCall, sendInternal } from "./hostile/internal.js";
import { countFromEnv, createPrng, seedFromEnv } from "./hostile/prng.js";
import { hostileRequest } from "./hostile/request.js";
import { routeSchemas } from "./hostile/routes.js";

const SEED = seedFromEnv(process.env);
// 2 500 requests a mode (5 000 a run of both) take about 10 s a mode on the 2-core machine.
const COUNT = countFromEnv(process.env, 2500);
const CONCURRENCY = 8;
const INTERNAL_COUNT = Math.max(50, Math.round(COUNT / 10));

/** Runs `count` jobs, `concurrency` at a time, in index order. */
async function inParallel(count: number, concurrency: number, job: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await job(next++);
    }),
  );
}

function histogram(values: Iterable<string>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

it("the generator's route table is the gateway's whole public surface", () => {
  const stub = {} as Parameters<typeof publicRoutes>[0];
  const table = publicRoutes(stub).map((r) => `${r.method} ${r.path} ${r.auth}`);
  expect(routeSchemas.map((r) => `${r.method} ${r.path} ${r.auth}`).sort()).toEqual(table.sort());
});

describe.each(oneSharedSystem())("hostile requests ($mode mode)", (sys) => {
  async function tenant() {
    const t = await provisionTenant(sys, { rateLimitRps: 1_000_000, rateLimitBurst: 1_000_000, serverLimit: 1000n });
    const knownIds: string[] = [];
    for (const name of ["connected", "pending"]) {
      const res = await send(sys.baseUrl, "POST", "/v1/api/servers", { headers: t.bearer(), body: { name } });
      expect(res.status, res.text).toBe(201);
      knownIds.push(res.body.serverId);
    }
    await grpcCheckIn(sys.internalUrl, knownIds[0] as string, { pluginVersion: "1.0.0" });
    return { ...t, knownIds };
  }

  it(`answers ${COUNT} hostile requests within the contract (seed ${SEED})`, { timeout: 300_000 }, async () => {
    const t = await tenant();
    const prng = createPrng(SEED);
    const requests = Array.from({ length: COUNT }, () =>
      hostileRequest({ prng, knownIds: t.knownIds }, { key: t.key, signer: t.signer }),
    );
    const started = performance.now();
    const failures: string[] = [];
    const statuses: string[] = [];
    await inParallel(requests.length, CONCURRENCY, async (index) => {
      const req = requests[index] as (typeof requests)[number];
      const answer = await sendHostile(sys.baseUrl, req);
      statuses.push(answer instanceof Error ? "error" : String(answer.status));
      const wrong = contractViolations(req, answer);
      if (wrong.length > 0) failures.push(`#${index} ${describeFailure(req, answer, wrong)}`);
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    process.stdout.write(
      `hostile (${sys.mode}): seed ${SEED}, ${COUNT} requests in ${seconds} s, statuses ${JSON.stringify(histogram(statuses))}\n` +
        `  replay with HOSTILE_SEED=${SEED} HOSTILE_COUNT=${COUNT}\n`,
    );
    expect(failures.slice(0, 10), `${failures.length} of ${COUNT} broke the contract (seed ${SEED})`).toEqual([]);
  });

  // The servers service over Connect, straight (distributed) or through the internal port's
  // forwarding (embedded), given random bodies: the caller's bytes are never the service's fault.
  async function internalAnswers() {
    const t = await tenant();
    const { memberId } = await sys.admin.addMember({ tenantId: t.tenantId, role: MemberRole.OWNER });
    const actor = create(ActorSchema, { memberId, role: MemberRole.OWNER, instanceSettings: true });
    const context = trustedHeaders({ tenantId: t.tenantId, actor });
    const prng = createPrng(SEED);
    const session = connectInternal(sys.serviceUrls?.servers ?? sys.internalUrl);
    try {
      const answers: { call: InternalCall; answer: string }[] = [];
      await inParallel(INTERNAL_COUNT, CONCURRENCY, async () => {
        const call = hostileInternalCall(prng, context);
        answers.push({ call, answer: await sendInternal(session, call) });
      });
      return answers;
    } finally {
      session.close();
    }
  }

  it(`answers ${INTERNAL_COUNT} random bodies to the servers service, never internal (seed ${SEED})`, async () => {
    const answers = await internalAnswers();
    const byKind = histogram(answers.map(({ call, answer }) => `${call.kind}: ${answer}`));
    process.stdout.write(`hostile internal (${sys.mode}): answers ${JSON.stringify(byKind)}\n`);
    // Every call got a Connect answer; none hung or broke the connection, none blamed the service.
    expect(
      answers.filter(
        ({ answer }) => answer.startsWith("no answer") || answer.startsWith("stream error") || answer === "internal",
      ),
    ).toEqual([]);
  });
});
