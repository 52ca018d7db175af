// The image as a cluster runs it: test/image/run.sh builds it from deploy/Dockerfile and
// hands its name over in REPLAY_IMAGE; this file runs each Deployment of the dev overlay from it
// with podman, as its pod spec says, against this machine's Postgres and NATS, and checks what the
// kubelet and an operator would. Run by `npm run test:image`, never by `npm test`.
//
// Each container as its pod runs it, read from `kubectl kustomize deploy/k8s/overlays/dev`:
// the manifest's args; its env (the ConfigMap's data, its own entries, Secrets' values of this
// run); a read-only root; the pod's runAsUser/runAsGroup and fsGroup; no capabilities and no
// privilege escalation; the volumes it mounts, and no other writable place: emptyDir -> tmpfs of
// its sizeLimit, a Secret -> a read-only directory holding its items (defaultMode, group fsGroup),
// a PersistentVolumeClaim -> one host directory per claim (shared, as the dev overlay's is).
//
// What differs from a pod, and why. All five share the host's network (podman --network host:
// Debian's podman has no bridge networking set up here), so where each pod would have its own
// network namespace, each (Deployment, containerPort) gets a free host port instead:
// - PORT and INTERNAL_PORT, and the probes' ports, go through that map, so a probe that names the
//   wrong port (or a name no port has) finds nothing listening;
// - a URL in the env whose host is a Service of the render (http://replay-markers:9090) keeps its
//   host name, mapped to 127.0.0.1 by --add-host, and takes the host port of the Service's
//   targetPort; other host names (nats, the Helm release) are mapped to 127.0.0.1 too and keep their
//   port: this machine's NATS listens on 4222, as the chart's does;
// - DATABASE_URL (CloudNativePG's Secret) is a fresh database on this machine's Postgres (no TLS,
//   so DATABASE_CA_FILE is left unset; its Secret is still mounted); NATS_NAMESPACE is fresh;
// - webhooks may deliver to the test's receiver on 127.0.0.1 (WEBHOOK_ALLOW_TARGETS) and trusts
//   its self-signed certificate (WEBHOOK_CA_FILE, a read-only mount of the test's).
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { access, chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import { IdentityAdminService } from "../../gen/replay/identity/v1/admin_pb.js";
import { deleteNamespaceStreams } from "../../lib/bus/_testing.js";
import { internalTokenInterceptor } from "../../lib/rpc/internal-token.js";
import { freePorts } from "../free-port.js";
import { ALL_SCOPES, send, sendSigned } from "../http.js";
import { containerEnv, type K8sObject, render, root } from "../k8s-manifests.js";
import { pollUntil } from "../poll.js";
import { createDatabase } from "../system.js";
import { startWebhookReceiver, type WebhookReceiver, writeReceiverCertificate } from "../webhook-receiver.js";

const run = promisify(execFile);
const image = process.env.REPLAY_IMAGE as string;
if (!image) throw new Error("REPLAY_IMAGE is unset: run `npm run test:image`, which builds the image first");
const READY_TIMEOUT_MS = 120_000;

async function podman(args: readonly string[], input?: Buffer): Promise<string> {
  if (input === undefined) return (await run("podman", args, { maxBuffer: 64 * 2 ** 20 })).stdout;
  return new Promise((resolve, reject) => {
    const child = spawn("podman", args, { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.once("exit", (code) =>
      code === 0
        ? resolve(Buffer.concat(out).toString())
        : reject(new Error(`podman ${args.join(" ")}: exit ${code}\n${Buffer.concat(err)}`)),
    );
    child.stdin.end(input);
  });
}

/** "64Mi" -> bytes, as Kubernetes reads a quantity. */
function bytesOf(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity);
  if (!match) throw new Error(`cannot read the quantity "${quantity}"`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[match[2] ?? ""] ?? 1;
  return Number(match[1]) * unit;
}

type Probe = {
  kind: string;
  httpGet?: { path: string; port: number | string };
  grpc?: { port: number; service?: string };
};
type ServicePort = { name?: string; port: number; targetPort?: number | string };
type Pod = {
  name: string;
  container: string;
  deployment: K8sObject;
  /** containerPort -> the host port it is mapped to. */
  ports: Map<number, number>;
  startedAt: number;
  readyMs?: number;
  /** Where its volumes are mounted: podman, as the kubelet's runtime, makes these mount points. */
  mountPaths: string[];
};

describe("the image, run as the dev overlay's pods", () => {
  const pods: Pod[] = [];
  const runId = randomBytes(3).toString("hex");
  let objects: K8sObject[];
  let work: string;
  let token: string;
  /** The Secrets of secrets.example.yaml, with this run's values. */
  let secretData: Record<string, Record<string, string>>;
  let receiver: WebhookReceiver;
  let cleanup: () => Promise<void> = async () => {};

  const podOf = (name: string) => pods.find((p) => p.name === name) as Pod;
  const spec = (p: Pod) => p.deployment.spec.template.spec;
  const containerSpec = (p: Pod) => spec(p).containers[0];
  /** A probe's port (a number or a port name) on the host, or undefined when the container declares no such port. */
  const hostPortOf = (p: Pod, port: number | string): number | undefined => {
    const declared = containerSpec(p).ports as { name?: string; containerPort: number }[];
    const number = typeof port === "number" ? port : declared.find((d) => d.name === port)?.containerPort;
    return number === undefined ? undefined : p.ports.get(number);
  };
  /** The pod a Service's selector picks. */
  const podBehind = (service: K8sObject): Pod | undefined =>
    pods.find((p) =>
      Object.entries(service.spec.selector as Record<string, string>).every(
        ([k, v]) => p.deployment.spec.template.metadata.labels?.[k] === v,
      ),
    );
  /** What the container printed, stdout (its log lines) and stderr (a refused configuration). */
  const logs = async (p: Pod) =>
    run("podman", ["logs", p.container], { maxBuffer: 64 * 2 ** 20 }).then(
      ({ stdout, stderr }) => `${stdout}${stderr}`.slice(-4000),
      (err: Error) => err.message,
    );

  beforeAll(async () => {
    objects = await render("overlays/dev");
    const deployments = objects.filter((o) => o.kind === "Deployment");
    const services = objects.filter((o) => o.kind === "Service");
    const database = await createDatabase(process.env.DATABASE_URL as string);
    const namespace = `image_${randomBytes(4).toString("hex")}`;
    work = await mkdtemp("/var/tmp/replay-image-test-");
    await mkdir(join(work, "receiver"));
    writeReceiverCertificate(join(work, "receiver"));
    receiver = await startWebhookReceiver({ certDir: join(work, "receiver") });
    cleanup = async () => {
      await receiver.close();
      await database.drop();
      await deleteNamespaceStreams(process.env.NATS_URL as string, namespace);
      await rm(work, { recursive: true, force: true });
    };
    token = randomBytes(32).toString("hex");
    secretData = {
      "replay-db-app": { uri: database.url },
      "replay-db-ca": { "ca.crt": await readFile(join(work, "receiver", "cert.pem"), "utf8") },
      "replay-internal-token": { INTERNAL_TOKEN: token },
      "replay-page-token": { key: randomBytes(32).toString("base64") },
      "replay-secrets-key": { key: randomBytes(32).toString("base64") },
    };
    const secretEnv = { DATABASE_URL: database.url, INTERNAL_TOKEN: token };

    // Host ports: one per (Deployment, containerPort).
    const declared = deployments.flatMap((d) =>
      (d.spec.template.spec.containers[0].ports as { containerPort: number }[]).map((port) => ({ d, port })),
    );
    const free = await freePorts(declared.length);
    for (const d of deployments) {
      const ports = new Map<number, number>();
      declared.forEach((entry, i) => {
        if (entry.d === d) ports.set(entry.port.containerPort, free[i] as number);
      });
      pods.push({
        name: d.metadata.name,
        container: `replay-image-${runId}-${d.metadata.name}`,
        deployment: d,
        ports,
        startedAt: 0,
        mountPaths: [],
      });
    }
    // Service name -> host port of the pod behind it (its selector), by the Service's port.
    const serviceHostPort = (host: string, port: number): number | undefined => {
      const service = services.find((s) => s.metadata.name === host);
      const servicePort = (service?.spec.ports as ServicePort[] | undefined)?.find((sp) => sp.port === port);
      const pod = service && podBehind(service);
      if (!servicePort || !pod) return undefined;
      return hostPortOf(pod, servicePort.targetPort ?? servicePort.port);
    };

    for (const pod of pods) {
      const podSpec = spec(pod);
      const container = containerSpec(pod);
      const security = podSpec.securityContext ?? {};
      const hosts = new Set<string>();
      const env: Record<string, string> = {};
      for (const [key, value] of Object.entries(containerEnv(pod.deployment, objects, secretEnv))) {
        env[key] = value;
        if (!/^[a-z]+:\/\//.test(value) || key === "DATABASE_URL" || key === "BLOB_URL") continue;
        const url = new URL(value);
        hosts.add(url.hostname);
        const mapped = serviceHostPort(url.hostname, Number(url.port));
        if (mapped !== undefined) {
          url.port = String(mapped);
          env[key] = url.toString().replace(/\/$/, "");
        }
      }
      for (const key of ["PORT", "INTERNAL_PORT"]) {
        if (env[key] === undefined) continue;
        const mapped = pod.ports.get(Number(env[key]));
        if (mapped === undefined)
          throw new Error(`${pod.name}: ${key}=${env[key]} is no containerPort of its container`);
        env[key] = String(mapped);
      }
      env.NATS_NAMESPACE = namespace;
      delete env.DATABASE_CA_FILE;
      const extraMounts: string[] = [];
      if (pod.name === "replay-webhooks") {
        env.WEBHOOK_ALLOW_TARGETS = `127.0.0.1:${receiver.port}`;
        env.WEBHOOK_CA_FILE = "/etc/replay-test/receiver-ca.pem";
        extraMounts.push(
          "--mount",
          `type=bind,source=${join(work, "receiver", "cert.pem")},destination=${env.WEBHOOK_CA_FILE},ro=true`,
        );
      }

      const mounts: string[] = [];
      for (const mount of container.volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]) {
        const volume = (podSpec.volumes as any[]).find((v) => v.name === mount.name);
        if (volume.emptyDir) {
          const size = volume.emptyDir.sizeLimit ? `,tmpfs-size=${bytesOf(volume.emptyDir.sizeLimit)}` : "";
          mounts.push("--mount", `type=tmpfs,destination=${mount.mountPath},tmpfs-mode=1777${size}`);
        } else if (volume.secret) {
          const dir = join(work, "secrets", pod.name, volume.name);
          await mkdir(dir, { recursive: true });
          const data = secretData[volume.secret.secretName];
          if (!data) throw new Error(`${pod.name}: no test value for Secret ${volume.secret.secretName}`);
          const items: { key: string; path: string }[] =
            volume.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }));
          for (const item of items) {
            const file = join(dir, item.path);
            await writeFile(file, data[item.key] as string);
            await chown(file, 0, security.fsGroup ?? 0);
            await chmod(file, volume.secret.defaultMode ?? 0o644);
          }
          mounts.push("--mount", `type=bind,source=${dir},destination=${mount.mountPath},ro=true`);
        } else if (volume.persistentVolumeClaim) {
          const dir = join(work, "claims", volume.persistentVolumeClaim.claimName);
          await mkdir(dir, { recursive: true });
          await chown(dir, security.runAsUser ?? 0, security.fsGroup ?? 0);
          mounts.push("--mount", `type=bind,source=${dir},destination=${mount.mountPath},ro=${!!mount.readOnly}`);
        } else {
          throw new Error(`${pod.name}: volume ${volume.name} is of a kind this test does not map to podman`);
        }
      }

      pod.mountPaths = [...mounts, ...extraMounts]
        .filter((arg) => arg !== "--mount")
        .map((arg) => /destination=([^,]+)/.exec(arg)?.[1] as string);
      const args = [
        "run",
        "--detach",
        `--name=${pod.container}`,
        "--network=host",
        ...[...hosts].map((host) => `--add-host=${host}:127.0.0.1`),
        ...(container.securityContext?.readOnlyRootFilesystem ? ["--read-only", "--read-only-tmpfs=false"] : []),
        ...(security.runAsUser !== undefined ? [`--user=${security.runAsUser}:${security.runAsGroup ?? 0}`] : []),
        ...(security.fsGroup !== undefined ? [`--group-add=${security.fsGroup}`] : []),
        ...((container.securityContext?.capabilities?.drop ?? []) as string[]).map((cap) => `--cap-drop=${cap}`),
        ...(container.securityContext?.allowPrivilegeEscalation === false ? ["--security-opt=no-new-privileges"] : []),
        `--stop-timeout=${podSpec.terminationGracePeriodSeconds}`,
        ...Object.entries(env).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
        ...mounts,
        ...extraMounts,
        image,
        ...(container.args as string[]),
      ];
      pod.startedAt = performance.now();
      await podman(args);
    }
    // Time to ready: from `podman run` to the first answer of the readiness probe, polled every 100 ms.
    await Promise.all(
      pods.map(async (pod) => {
        const probe = containerSpec(pod).readinessProbe;
        let checked = performance.now();
        const ready = async () => {
          if (await answers(pod, probe).catch(() => false)) return true;
          // A container that has exited will not become ready: fail now, with its log.
          if (performance.now() - checked > 1000) {
            checked = performance.now();
            const state = (
              await podman(["inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", pod.container])
            ).trim();
            if (!state.startsWith("running"))
              throw new Error(`${pod.name} exited before it was ready (${state}):\n${await logs(pod)}`);
          }
          return false;
        };
        await pollUntil(ready, Boolean, READY_TIMEOUT_MS, 100).catch(async (err: Error) => {
          throw err.message.includes("exited before")
            ? err
            : new Error(`${pod.name} not ready in ${READY_TIMEOUT_MS} ms:\n${await logs(pod)}`);
        });
        pod.readyMs = Math.round(performance.now() - pod.startedAt);
      }),
    );
    process.stdout.write(
      `image test: time to ready (podman run to readiness probe): ${pods.map((p) => `${p.name} ${p.readyMs} ms`).join(", ")}\n`,
    );
  }, READY_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    for (const pod of pods) await podman(["rm", "--force", "--time=0", pod.container]).catch(() => undefined);
    await cleanup();
  });

  /** Whether the probe answers as the kubelet wants it: httpGet 200-399, grpc SERVING. */
  async function answers(pod: Pod, probe: Probe): Promise<boolean> {
    if (probe.httpGet) {
      const port = hostPortOf(pod, probe.httpGet.port);
      if (port === undefined) return false;
      const res = await fetch(`http://127.0.0.1:${port}${probe.httpGet.path}`, { signal: AbortSignal.timeout(3000) });
      await res.arrayBuffer();
      return res.status >= 200 && res.status < 400;
    }
    if (probe.grpc) {
      const port = hostPortOf(pod, probe.grpc.port);
      if (port === undefined) return false;
      const health = createClient(Health, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
      const res = await health.check({ service: probe.grpc.service ?? "" }, { timeoutMs: 3000 });
      return res.status === Status.SERVING;
    }
    throw new Error(`${pod.name}: a probe of a kind this test cannot run: ${JSON.stringify(probe)}`);
  }

  it("answers every probe the manifests declare, on the port and path they declare", async () => {
    for (const pod of pods) {
      for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"]) {
        const probe = containerSpec(pod)[kind] as Probe | undefined;
        if (!probe) continue;
        const ok = await answers(pod, probe).catch((err) => err);
        expect(ok, `${pod.name} ${kind} ${JSON.stringify(probe)}\n${await logs(pod)}`).toBe(true);
      }
    }
  });

  it("runs as the pod's non-root user, with no capabilities", async () => {
    const user = (await podman(["image", "inspect", "--format", "{{.Config.User}}", image])).trim();
    const uid = (await podman(["run", "--rm", "--network=host", "--entrypoint=id", image, "-u"])).trim();
    expect(user, "the image's USER").not.toBe("");
    expect(uid, `the image's USER (${user}) is root`).not.toBe("0");
    for (const pod of pods) {
      expect(spec(pod).securityContext?.runAsNonRoot, pod.name).toBe(true);
      const pid = (await podman(["inspect", "--format", "{{.State.Pid}}", pod.container])).trim();
      const status = await readFile(`/proc/${pid}/status`, "utf8");
      const uids = /^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/);
      expect(uids?.includes("0"), `${pod.name} runs with uid ${uids?.join(" ")}`).toBe(false);
      expect(/^CapEff:\s+0+$/m.test(status), `${pod.name}: ${/^CapEff:.*$/m.exec(status)?.[0]}`).toBe(true);
    }
  });

  it("serves a tenant, a key and requests through the public port: a write, a read, a webhook delivery", async () => {
    const gateway = podOf("replay-gateway");
    const publicUrl = `http://127.0.0.1:${hostPortOf(gateway, "http")}`;
    const internalPort = hostPortOf(gateway, "internal") as number;
    // deploy/README.md "Bring it up", step 5: replayctl from inside the gateway's container.
    const replayctl = async (args: string[], input?: Buffer) =>
      JSON.parse(
        await podman(
          [
            "exec",
            ...(input ? ["--interactive"] : []),
            "--env",
            `REPLAYCTL_URL=http://127.0.0.1:${internalPort}`,
            gateway.container,
            "sh",
            "-c",
            `${input ? "cat > /tmp/archive && " : ""}REPLAYCTL_TOKEN=$INTERNAL_TOKEN node dist/cli/replayctl.js "$@"`,
            "replayctl",
            ...args,
          ],
          input,
        ),
      );
    const { tenantId } = await replayctl(["tenant", "create", "--name", "image-test"]);
    expect(tenantId).toMatch(/^[0-9a-f-]{36}$/);
    const admin = createClient(
      IdentityAdminService,
      createConnectTransport({
        baseUrl: `http://127.0.0.1:${internalPort}`,
        httpVersion: "1.1",
        interceptors: [internalTokenInterceptor(token)],
      }),
    );
    const { memberId } = await admin.addMember({ tenantId, role: MemberRole.OWNER });
    const { key } = await admin.createApiKey({ tenantId, memberId, scopes: ALL_SCOPES });
    const { kid, secret } = await admin.createSigningKey({ tenantId });
    const signer = { tenant: tenantId, kid, secret };

    const path = receiver.newPath();
    const subscribed = await sendSigned(publicUrl, signer, "POST", "/v1/webhooks", {
      body: { url: receiver.url(path), events: ["collection.finalized"] },
    });
    expect(subscribed.status, subscribed.text).toBe(201);
    const created = await send(publicUrl, "POST", "/v1/api/servers", {
      headers: { authorization: `Bearer ${key}` },
      body: { name: "image-test" },
    });
    expect(created.status, created.text).toBe(201);
    const serverId: string = created.body.serverId;

    // A recorder's recording, archive included (replays writes it to the blobs claim).
    await replayctl(["recorder", "checkin", "--server", serverId, "--plugin-version", "1.0.0"]);
    const { replayId } = await pollUntil(
      () => replayctl(["recording", "start", "--server", serverId]).catch(() => ({ replayId: undefined })),
      (r) => r.replayId !== undefined,
      20_000,
      200,
    );
    const archive = randomBytes(4096);
    await replayctl(["recording", "finish", "--replay", replayId, "--archive", "/tmp/archive"], archive);

    const read = await pollUntil(
      () =>
        send(publicUrl, "GET", `/v1/api/replays/${replayId}`, {
          headers: { authorization: `Bearer ${key}` },
        }),
      (res) => res.status === 200,
      30_000,
      200,
    );
    expect(read.body).toMatchObject({ id: replayId, server_id: serverId, size_bytes: archive.length });
    const [delivery] = await receiver.waitForRequests(path, 1, 60_000);
    expect(JSON.stringify(delivery?.json)).toContain(replayId);
  }, 120_000);

  it("answers the prod overlay's ServiceMonitor: /metrics on each port it names, with the internal token only", async () => {
    const monitor = (await render("overlays/prod")).find((o) => o.kind === "ServiceMonitor");
    if (!monitor) throw new Error("the prod overlay renders no ServiceMonitor");
    const selected = objects.filter(
      (o) =>
        o.kind === "Service" &&
        Object.entries(monitor.spec.selector.matchLabels as Record<string, string>).every(
          ([k, v]) => o.metadata.labels?.[k] === v,
        ),
    );
    const scraped: string[] = [];
    for (const endpoint of monitor.spec.endpoints as any[]) {
      const credentials = endpoint.authorization.credentials;
      const bearer = secretData[credentials.name]?.[credentials.key];
      expect(bearer, `the Secret ${credentials.name} key ${credentials.key}`).toBeDefined();
      for (const service of selected) {
        const port = (service.spec.ports as ServicePort[]).find((sp) => sp.name === endpoint.port);
        const pod = podBehind(service);
        if (!port || !pod) continue;
        const url = `http://127.0.0.1:${hostPortOf(pod, port.targetPort ?? port.port)}${endpoint.path ?? "/metrics"}`;
        const where = `${service.metadata.name} port ${endpoint.port}`;
        const res = await fetch(url, { headers: { authorization: `Bearer ${bearer}` } });
        expect(res.status, where).toBe(200);
        expect(await res.text(), where).toContain("process_cpu_seconds_total");
        const refused = await fetch(url);
        await refused.arrayBuffer();
        expect(refused.status, `${where} without the token`).toBe(401);
        scraped.push(pod.name);
      }
    }
    // Every process is scraped: the four services on grpc, the gateway on internal.
    expect(new Set(scraped).size, `scraped: ${scraped.join(", ")}`).toBe(pods.length);
  });

  it("stops each container on SIGTERM within the pod's grace period, exit 0, having written nothing outside its mounts", async () => {
    // Kubernetes stops them in no order; the gateway first, as its endpoints go first.
    for (const pod of [podOf("replay-gateway"), ...pods.filter((p) => p.name !== "replay-gateway")]) {
      const podSpec = spec(pod);
      const budgetMs =
        (podSpec.terminationGracePeriodSeconds - (containerSpec(pod).lifecycle?.preStop?.sleep?.seconds ?? 0)) * 1000;
      const started = performance.now();
      await podman(["kill", "--signal=TERM", pod.container]);
      const code = Number((await podman(["wait", pod.container])).trim());
      const tookMs = performance.now() - started;
      expect(code, `${pod.name}\n${await logs(pod)}`).toBe(0);
      expect(tookMs, pod.name).toBeLessThan(budgetMs);
      // A read-only root refuses writes; this also catches what a writable root would have kept.
      // The mount points podman made for the volumes (and their parent folders) are the runtime's.
      const mountPoints = new Set(
        pod.mountPaths.flatMap((path) => path.split("/").map((_, i, parts) => parts.slice(0, i + 1).join("/"))),
      );
      const written = (await podman(["diff", pod.container]))
        .split("\n")
        .filter((line) => line.trim() !== "" && !mountPoints.has(line.slice(2)));
      expect(written, `${pod.name} wrote outside its mounts`).toEqual([]);
    }
  }, 180_000);

  it("holds no dev dependencies, source maps, tests, dangling links or secrets", async () => {
    const mount = (await podman(["image", "mount", image])).trim();
    try {
      const lock = JSON.parse(await readFile(join(root, "package-lock.json"), "utf8")) as {
        packages: Record<string, { dev?: boolean }>;
      };
      const devOnly = Object.entries(lock.packages)
        .filter(([path, entry]) => path !== "" && entry.dev)
        .map(([path]) => path);
      const exists = (path: string) =>
        access(join(mount, "app", path)).then(
          () => true,
          () => false,
        );
      const present: string[] = [];
      for (const path of devOnly) if (await exists(path)) present.push(path);
      expect(present, "dev dependencies in /app").toEqual([]);

      const { stdout: unwanted } = await run(
        "find",
        [
          join(mount, "app"),
          "(",
          ...["-name", "*.map", "-o", "-name", "*.test.js", "-o", "-path", `${join(mount, "app", "dist", "test")}`],
          ")",
          "-print",
        ],
        { maxBuffer: 64 * 2 ** 20 },
      );
      expect(unwanted.trim().split("\n").filter(Boolean), "source maps or tests in /app").toEqual([]);
      // A link to what the image does not hold (the client workspace's node_modules/@replay/client
      // once pointed at clients/, which is not copied) breaks whatever follows it.
      const { stdout: dangling } = await run("find", [join(mount, "app"), "-xtype", "l", "-print"]);
      expect(dangling.trim().split("\n").filter(Boolean), "dangling links in /app").toEqual([]);
    } finally {
      await podman(["image", "unmount", image]).catch(() => undefined);
    }
    // Secrets, in every layer's file list (a file deleted in a later layer is still in its own) and
    // in the content of every file of the image.
    const layers = join(work, "layers");
    await podman(["save", "--format=oci-dir", "--output", layers, image]);
    const index = JSON.parse(await readFile(join(layers, "index.json"), "utf8"));
    const manifestDigest: string = index.manifests[0].digest;
    const manifest = JSON.parse(await readFile(join(layers, "blobs", ...manifestDigest.split(":")), "utf8"));
    const secretName = /(^|\/)(\.env(\.[^/]*)?|\.npmrc|\.netrc|id_(rsa|ecdsa|ed25519)|[^/]*\.(key|p12|pfx))$/;
    const found: string[] = [];
    for (const layer of manifest.layers as { digest: string }[]) {
      const { stdout } = await run("tar", ["-tf", join(layers, "blobs", ...layer.digest.split(":"))], {
        maxBuffer: 256 * 2 ** 20,
      });
      for (const name of stdout.split("\n")) if (secretName.test(name.replace(/\/$/, ""))) found.push(name);
    }
    expect(found, "files that look like secrets in the image's layers").toEqual([]);
    const mounted = (await podman(["image", "mount", image])).trim();
    try {
      // Text files that name a PEM private key, then those that hold one (a base64 body, not the
      // "XXXX" of npm's documentation of its `key` setting).
      const { stdout } = await run("grep", ["-rlI", "--", "-----BEGIN [A-Z ]*PRIVATE KEY-----", mounted], {
        maxBuffer: 64 * 2 ** 20,
      }).catch((err: { code?: number; stdout?: string }) => (err.code === 1 ? { stdout: "" } : Promise.reject(err)));
      const keys: string[] = [];
      for (const file of stdout.split("\n").filter(Boolean)) {
        const text = await readFile(file, "utf8");
        if (/-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40,}/.test(text))
          keys.push(file.slice(mounted.length));
      }
      expect(keys, "files holding a private key").toEqual([]);
    } finally {
      await podman(["image", "unmount", image]).catch(() => undefined);
    }
  }, 180_000);
});
