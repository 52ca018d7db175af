import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../gen/grpc/health/v1/health_pb.js";
import { deleteNamespaceStreams } from "../lib/bus/_testing.js";
import { freePorts } from "./free-port.js";
import { containerEnv, type K8sObject, render, root } from "./k8s-manifests.js";
import { pollUntil } from "./poll.js";
import { createDatabase, distributedSkipReason } from "./system.js";

// This machine builds no container images: it has no container engine, and no registry it can
// reach serves the Dockerfile's base image (deploy/README.md). So this is the check instead, as
// close to the image as the machine allows:
// - the image's /app as the Dockerfile's runtime stage makes it: package.json, production
//   dependencies only (`npm ci --omit=dev`), dist/ and the migration folders, nothing else;
// - each of the five Deployments of the dev overlay started from it as its pod would start it:
//   the entry point with the manifest's args, exactly the manifest's environment and nothing
//   inherited, the ConfigMap's values, against the test Postgres and NATS;
// - probed as the kubelet probes it, scraped as the ServiceMonitor scrapes it, stopped as
//   Kubernetes stops it, and /app left as it was (the root filesystem is read-only).
// What differs from a pod, and why: the ports (free ones, one machine runs all five; the
// manifests' own ports are held to the configuration by deploy.test.ts), the service URLs (to
// those ports), the Secrets' values (test ones), the mounted files' paths (a temporary directory),
// and no DATABASE_CA_FILE (the test Postgres speaks no TLS; lib/db/tls.test.ts tests it).

const run = promisify(execFile);

/** /app of the image: the runtime stage of deploy/Dockerfile, file for file. */
async function imageTree(): Promise<string> {
  const app = await mkdtemp(join(tmpdir(), "replay-image-app-"));
  for (const file of ["package.json", "package-lock.json"]) await cp(join(root, file), join(app, file));
  // As the build stage's `npm prune --omit=dev` leaves it; scripts off, as nothing is built here.
  await run("npm", ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"], {
    cwd: app,
  });
  await rm(join(app, "package-lock.json"));
  await cp(join(root, "dist"), join(app, "dist"), { recursive: true });
  // The Dockerfile's `find gateway services -path '*/migrations/*.sql'`.
  for (const owner of ["gateway", ...(await readdir(join(root, "services"))).map((s) => `services/${s}`)]) {
    const from = join(root, owner, "migrations");
    const sql = await readdir(from).catch(() => []);
    if (sql.length === 0) continue;
    await mkdir(join(app, owner), { recursive: true });
    await cp(from, join(app, owner, "migrations"), { recursive: true, filter: (f) => !/\.(ts|js)$/.test(f) });
  }
  return app;
}

/** Every path under `dir`, to see that a run wrote nothing. */
async function listing(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).sort();
}

const skip = distributedSkipReason();
type Pod = { name: string; child: ChildProcess; output: string[]; port: number; internalPort?: number };

describe.skipIf(skip)("the dev overlay's five Deployments, started as their pods", () => {
  const pods: Pod[] = [];
  let app: string;
  let appBefore: string[];
  let mounts: string;
  let token: string;
  let cleanup: () => Promise<void> = async () => {};
  let deployments: K8sObject[];

  beforeAll(async () => {
    const objects = await render("overlays/dev");
    deployments = objects.filter((o) => o.kind === "Deployment");
    const database = await createDatabase(process.env.DATABASE_URL as string);
    const namespace = `deploy_${randomBytes(4).toString("hex")}`;
    app = await imageTree();
    appBefore = await listing(app);
    mounts = await mkdtemp(join(tmpdir(), "replay-pod-mounts-"));
    cleanup = async () => {
      await database.drop();
      await deleteNamespaceStreams(process.env.NATS_URL as string, namespace);
      await rm(mounts, { recursive: true, force: true });
      await rm(app, { recursive: true, force: true });
    };
    token = randomBytes(32).toString("hex");
    await writeFile(join(mounts, "page-token-key"), randomBytes(32).toString("base64"));
    const secrets: Record<string, string> = { DATABASE_URL: database.url, INTERNAL_TOKEN: token };
    const ports = await freePorts(deployments.length + 1);
    const portOf = new Map(deployments.map((d, i) => [d.metadata.name, ports[i] as number]));
    const serviceUrls = Object.fromEntries(
      deployments
        .filter((d) => d.metadata.name !== "replay-gateway")
        .map((d) => [`http://${d.metadata.name}:9090`, `http://127.0.0.1:${portOf.get(d.metadata.name)}`]),
    );

    for (const d of deployments) {
      const container = d.spec.template.spec.containers[0];
      const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
      for (const [key, value] of Object.entries(containerEnv(d, objects, secrets))) {
        env[key] = serviceUrls[value] ?? value;
      }
      // The test's stand-ins for what a pod is given: a free port, this run's NATS namespace,
      // the mounted Secret and volume at temporary paths.
      env.PORT = String(portOf.get(d.metadata.name));
      if (env.INTERNAL_PORT) env.INTERNAL_PORT = String(ports[deployments.length]);
      env.NATS_URL = process.env.NATS_URL as string;
      env.NATS_NAMESPACE = namespace;
      if (env.PAGE_TOKEN_KEY_FILE) env.PAGE_TOKEN_KEY_FILE = join(mounts, "page-token-key");
      env.BLOB_URL = pathToFileURL(join(mounts, "blobs")).href;
      // The test Postgres has no TLS (lib/db/tls.test.ts covers DATABASE_CA_FILE against a TLS front).
      delete env.DATABASE_CA_FILE;
      const output: string[] = [];
      // ENTRYPOINT ["node", "dist/start.js"], WORKDIR /app.
      const child = spawn(process.execPath, ["dist/start.js", ...container.args], {
        cwd: app,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      child.stdout?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
      child.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
      pods.push({
        name: d.metadata.name,
        child,
        output,
        port: Number(env.PORT),
        internalPort: env.INTERNAL_PORT ? Number(env.INTERNAL_PORT) : undefined,
      });
    }
  }, 120_000);

  afterAll(async () => {
    for (const pod of pods) if (pod.child.exitCode === null) pod.child.kill("SIGKILL");
    await cleanup();
  });

  const gateway = () => pods.find((p) => p.name === "replay-gateway") as Pod;
  const services = () => pods.filter((p) => p.name !== "replay-gateway");
  const exitOf = (p: Pod) =>
    p.child.exitCode !== null || p.child.signalCode !== null
      ? ` (exited: ${p.child.exitCode ?? p.child.signalCode})`
      : " (running)";
  const logs = () => pods.map((p) => `--- ${p.name}${exitOf(p)}\n${p.output.join("").slice(-3000)}`).join("\n");

  it("passes the probes: gRPC health without the token, the gateway's /healthz and /readyz", async () => {
    for (const pod of services()) {
      const health = createClient(Health, createGrpcTransport({ baseUrl: `http://127.0.0.1:${pod.port}` }));
      const answer = await pollUntil(
        () => health.check({ service: "" }).catch(() => undefined),
        (res) => res?.status === Status.SERVING,
        60_000,
        200,
      ).catch(() => undefined);
      expect(answer?.status, `${pod.name}\n${logs()}`).toBe(Status.SERVING);
    }
    const ready = await pollUntil(
      // Refused until the gateway listens, which may come after the services answer their probes.
      () =>
        fetch(`http://127.0.0.1:${gateway().port}/readyz`).then(
          (res) => res.status,
          () => 0,
        ),
      (status) => status === 200,
      60_000,
      200,
    ).catch(() => undefined);
    expect(ready, logs()).toBe(200);
    expect((await fetch(`http://127.0.0.1:${gateway().port}/healthz`)).status).toBe(200);
    // The public port answers as the API does: an unauthenticated call is a 401 problem.
    expect((await fetch(`http://127.0.0.1:${gateway().port}/v1/api/servers`)).status).toBe(401);
  }, 150_000);

  it("answers the ServiceMonitor's scrape with the internal token, and nothing without it", async () => {
    const targets = [...services().map((p) => p.port), gateway().internalPort as number];
    for (const port of targets) {
      const scraped = await fetch(`http://127.0.0.1:${port}/metrics`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(scraped.status, `port ${port}`).toBe(200);
      expect(await scraped.text()).toContain("process_cpu_seconds_total");
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status, `port ${port} without the token`).toBe(401);
    }
  });

  it("stops on SIGTERM within the grace period after preStop, exit code 0, having written nothing in /app", async () => {
    const budgetMs = Math.min(
      ...deployments.map(
        (d) =>
          (d.spec.template.spec.terminationGracePeriodSeconds -
            d.spec.template.spec.containers[0].lifecycle.preStop.sleep.seconds) *
          1000,
      ),
    );
    // Kubernetes stops them in no order; the gateway first, as its endpoints go first.
    for (const pod of [gateway(), ...services()]) {
      const started = performance.now();
      const code = await new Promise<number | null>((resolve) => {
        pod.child.once("exit", (exitCode) => resolve(exitCode));
        pod.child.kill("SIGTERM");
      });
      expect(code, `${pod.name}\n${logs()}`).toBe(0);
      expect(performance.now() - started, pod.name).toBeLessThan(budgetMs);
    }
    // A read-only root filesystem: nothing may be written but /tmp and the mounted volumes.
    expect(await listing(app)).toEqual(appBefore);
  }, 60_000);
});
