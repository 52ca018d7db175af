import { randomBytes, randomUUID } from "node:crypto";
import { AssetState } from "../../gen/replay/replays/v1/recording_pb.js";
import type { Api, Result, Tenant } from "./api.js";
import type { Model, Op, ReplayModel } from "./model.js";
import type { Rng } from "./rng.js";

/**
 * The soak's load: `concurrency` recorder sessions at a time, each a realistic life of one
 * server and its replay (create, check in, record with markers, finish or upload, asset and
 * collection transitions, sometimes a delete racing marker creates). Seeded per worker. A step
 * is retried only where a real client would: an idempotent call (check-in, a marker with an
 * Idempotency-Key) or one that cannot have taken effect yet (the replays service not knowing a
 * new server), and an UNAVAILABLE or 503 once or twice, as a client library does.
 */
const CHUNK_BYTES = 64 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export type Load = { stop(): Promise<void> };

export function startLoad(deps: {
  api: Api;
  model: Model;
  tenants: Tenant[];
  rng: Rng;
  concurrency: number;
  /** Called with what an upload is doing, so the fault schedule can kill a replays replica mid-upload. */
  uploads: { inFlight: number };
}): Load {
  let stopping = false;
  const workers = Array.from({ length: deps.concurrency }, (_, i) =>
    (async () => {
      const rng = deps.rng.fork(`worker-${i}`);
      // Staggered, so sessions do not march in step.
      await sleep(rng.int(0, 1500));
      while (!stopping) {
        const created = await session({ ...deps, rng, stopping: () => stopping }).catch((err) => {
          process.stderr.write(`soak: session failed: ${(err as Error).stack}\n`);
          return false;
        });
        // A client that could not even create its server backs off instead of spinning on 503s.
        if (!created) await sleep(rng.int(300, 1_000));
      }
    })(),
  );
  return {
    async stop() {
      stopping = true;
      await Promise.all(workers);
    },
  };
}

type SessionDeps = Parameters<typeof startLoad>[0] & { rng: Rng; stopping(): boolean };

const transient = (r: Result<unknown>) => r.outcome === "unknown";

/** Runs `call` again while `again` holds of its result, at most `times` in all. */
async function retrying<T extends Result<unknown>>(
  call: () => Promise<T>,
  again: (r: T) => boolean,
  times: number,
  waitMs: number,
): Promise<T> {
  let result = await call();
  for (let i = 1; i < times && again(result); i++) {
    await sleep(waitMs);
    result = await call();
  }
  return result;
}

/** One session; false when its server could not be created (nothing else was tried). */
async function session(d: SessionDeps): Promise<boolean> {
  const { api, model, rng } = d;
  const t = rng.pick(d.tenants);
  const created = await api.createServer(t, `soak-${randomUUID().slice(0, 8)}`);
  if (created.outcome !== "ok") return false;
  const serverId: string = created.value?.body.serverId;
  const checkIn = await retrying(() => api.checkIn(t, serverId), transient, 4, 500);
  model.servers.set(serverId, { tenantId: t.tenantId, checkedIn: checkIn.outcome });
  if (checkIn.outcome !== "ok" || d.stopping()) return true;

  // Until the replays service has heard of the server (an event away), starting is refused as
  // unknown or not connected; a recorder tries again.
  const started = await retrying(
    () => api.startRecording(t, serverId),
    (r) => transient(r) || r.entry.code === "SERVER_NOT_FOUND" || r.entry.code === "SERVER_NOT_CONNECTED",
    40,
    300,
  );
  if (started.outcome !== "ok") return true;
  const replayId = (started.value as { replayId: string }).replayId;
  const replay: ReplayModel = { replayId, tenantId: t.tenantId, serverId, ops: { start: "ok" } };
  model.replays.set(replayId, replay);
  // Every try is noted, not the last only: a delete whose first try's answer was lost and whose
  // retry found the replay gone (404) may have happened (the model merges: ok, unknown, refused).
  const step = async (op: Op, call: () => Promise<Result<unknown>>) => {
    const r = await retrying(
      async () => {
        const tried = await call();
        model.note(replay, op, tried.outcome);
        return tried;
      },
      transient,
      3,
      500,
    );
    return r.outcome;
  };

  let tick = 0;
  for (let i = rng.int(0, 4); i > 0 && !d.stopping(); i--) {
    tick += rng.int(1, 500);
    await marker(d, t, replay, { serverId, tick, label: `live ${tick}` }, "marker.byServer");
  }
  if (d.stopping()) return true;

  // The finish: a plain one, an upload, or an upload the recorder gives up on.
  const roll = rng.next();
  if (roll < 0.08) {
    const chunks = archive(rng.int(2, 4));
    d.uploads.inFlight++;
    const r = await api.uploadArchive(t, replayId, chunks, 1).finally(() => d.uploads.inFlight--);
    model.note(replay, "uploadCancelled", r.entry.status === "CANCELLED" ? "ok" : r.outcome);
    return true;
  }
  if (roll < 0.55) {
    const chunks = archive(rng.int(1, 4));
    d.uploads.inFlight++;
    const outcome = await step("upload", () => api.uploadArchive(t, replayId, chunks)).finally(
      () => d.uploads.inFlight--,
    );
    if (outcome === "ok") replay.sizeBytes = chunks.reduce((n, c) => n + c.length, 0);
    if (outcome !== "ok") return true;
  } else {
    const size = rng.int(1, 50_000_000);
    const outcome = await step("finish", () => api.finishRecording(t, replayId, BigInt(size)));
    if (outcome === "ok") replay.sizeBytes = size;
    if (outcome !== "ok") return true;
  }

  for (let i = rng.int(0, 3); i > 0 && !d.stopping(); i--) {
    tick += rng.int(1, 500);
    await marker(d, t, replay, { replayId, tick, label: `after ${tick}` }, "marker.byReplay");
  }
  if (rng.chance(0.3)) await api.getReplay(t, replayId);

  if (!d.stopping() && rng.chance(0.85)) {
    if (
      (await step("processing", () => api.setAssetState(t, replayId, AssetState.PROCESSING, "processing"))) === "ok"
    ) {
      const ready = rng.chance(0.8);
      const outcome = ready
        ? await step("ready", () => api.setAssetState(t, replayId, AssetState.READY, "ready"))
        : await step("failed", () => api.setAssetState(t, replayId, AssetState.FAILED, "failed"));
      if (outcome === "ok" && ready && rng.chance(0.6)) await step("release", () => api.releaseCollection(t, replayId));
    }
  }
  if (!d.stopping() && rng.chance(0.2)) await step("revoke", () => api.revokeCollection(t, replayId));

  // A delete racing marker creates on the same replay.
  if (!d.stopping() && rng.chance(0.3)) {
    const racers = Array.from({ length: rng.int(1, 3) }, () => {
      tick += 1;
      return marker(d, t, replay, { replayId, tick, label: `race ${tick}` }, "marker.racingDelete", false);
    });
    await Promise.all([step("delete", () => api.deleteReplay(t, replayId)), ...racers]);
  }
  return true;
}

/** One marker create, half of them with an Idempotency-Key (retried on an unknown answer, sometimes repeated). */
async function marker(
  d: SessionDeps,
  t: Tenant,
  replay: ReplayModel,
  body: Record<string, unknown>,
  op: string,
  waitForProjection = true,
): Promise<void> {
  const { api, model, rng } = d;
  const key = rng.chance(0.5) ? `soak-${randomUUID()}` : undefined;
  const send = () => api.createMarker(t, op, replay.replayId, body, key);
  // The markers service learns of a recording by an event: a create right after the start may be
  // refused as unknown until then, and a client sending markers "asynchronously" tries again.
  const notYet = (r: Result<unknown>) =>
    waitForProjection && (r.entry.code === "NO_ACTIVE_RECORDING" || r.entry.code === "REPLAY_NOT_FOUND");
  const tries = key ? 4 : 1;
  let r = await retrying(send, (x) => (key !== undefined && transient(x)) || notYet(x), tries + 6, 300);
  const answers: string[] = [];
  const noteAnswer = (x: typeof r) => {
    if (x.outcome !== "ok") return;
    const id: string = x.value?.body.id;
    answers.push(id);
    if (key) {
      const k = `${t.tenantId}:${key}`;
      const seen = model.keyedAnswers.get(k) ?? new Set<string>();
      seen.add(id);
      model.keyedAnswers.set(k, seen);
    }
  };
  noteAnswer(r);
  // A client that lost the first answer sends the same request again with its key.
  if (key && r.outcome === "ok" && rng.chance(0.2)) {
    r = await send();
    noteAnswer(r);
  }
  const first = answers[0];
  if (first)
    model.markers.push({ markerId: first, replayId: replay.replayId, tenantId: t.tenantId, idempotencyKey: key });
}

function archive(chunks: number): Uint8Array[] {
  return Array.from({ length: chunks }, () => new Uint8Array(randomBytes(CHUNK_BYTES)));
}
