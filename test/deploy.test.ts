import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loadConfig, type ProcessName, processNames } from "../lib/config.js";
import {
  containerEnv,
  type K8sObject,
  k8sDir,
  parseYaml,
  render,
  root,
  schemaProblems,
  typeProblems,
} from "./k8s-manifests.js";

const overlays = ["base", "overlays/dev", "overlays/prod"] as const;

describe.each(overlays)("deploy/k8s/%s", (dir) => {
  it("renders, and every object is valid against the Kubernetes and CRD schemas and types", async () => {
    const objects = await render(dir);
    expect(objects.length).toBeGreaterThan(20);
    expect(await schemaProblems(objects)).toEqual([]);
    expect(await typeProblems(objects, dir.replace("/", "-"))).toEqual([]);
  }, 60_000);
});

describe("the manifest checks", () => {
  it("refuse a misspelt field, a wrong type and a broken CRD object", async () => {
    const objects = await render("overlays/prod");
    const broken = structuredClone(objects);
    const deployment = broken.find((o) => o.kind === "Deployment") as K8sObject;
    const container = deployment.spec.template.spec.containers[0];
    container.readinesProbe = container.readinessProbe;
    delete container.readinessProbe;
    const service = broken.find((o) => o.kind === "Service") as K8sObject;
    service.spec.ports[0].port = "ninety";
    const cluster = broken.find((o) => o.kind === "Cluster") as K8sObject;
    cluster.spec.instances = "three";
    expect(await schemaProblems(broken)).toEqual([
      "Service/replay-gateway: data/spec/ports/0/port must be integer",
      "Cluster/replay-db: data/spec/instances must be integer",
    ]);
    const types = await typeProblems(broken, "broken");
    expect(types).toHaveLength(3);
    expect(types.join("\n")).toMatch(/^Deployment\/replay-gateway: TS2353: .*'"readinesProbe"' does not exist/m);
    expect(types.join("\n")).toMatch(/^Service\/replay-gateway: TS2322/m);
    expect(types.join("\n")).toMatch(/^Cluster\/replay-db: TS2322/m);
  }, 60_000);
});

const operations = readFileSync(join(root, "..", "shared", "spec", "operations.md"), "utf8");
const configurationDoc = readFileSync(join(root, "docs", "configuration.md"), "utf8");
const deployReadme = readFileSync(join(root, "deploy", "README.md"), "utf8");
/** docs/configuration.md's table: where operations.md is silent, our documented variables. */
const documentedVariables = configurationDoc.slice(
  configurationDoc.indexOf("## Variables"),
  configurationDoc.indexOf("## Start and stop"),
);
/** How long a process drains after SIGTERM (operations.md: up to 10 s). */
const DRAIN_SECONDS = 10;
const SECRET_PLACEHOLDERS: Record<string, string> = {
  DATABASE_URL: "postgres://replay@db:5432/replay",
  INTERNAL_TOKEN: "t".repeat(32),
  INTERNAL_TOKEN_ACCEPTED: "u".repeat(32),
};

/** What a mounted file holds, as the configuration reads it: a CA for *_CA_FILE, a secret otherwise. */
const mountedFile = (path: string) =>
  path.endsWith(".crt") ? "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" : "k".repeat(32);

const container = (d: K8sObject) => d.spec.template.spec.containers[0];
const processOf = (d: K8sObject) => container(d).args[0] as ProcessName;
const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

describe.each(["overlays/dev", "overlays/prod"])("deploy/k8s/%s matches the code and operations.md", (dir) => {
  let objects: K8sObject[];
  let deployments: K8sObject[];
  beforeAll(async () => {
    objects = await render(dir);
    deployments = objects.filter((o) => o.kind === "Deployment");
  });
  const ofKind = (kind: string) => objects.filter((o) => o.kind === kind);

  it("runs each of the five processes once, by the image's entry point and its argument", () => {
    expect(deployments.map(processOf).sort()).toEqual([...processNames].sort());
    const dockerfile = readFileSync(join(root, "deploy", "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "dist\/start\.js"\]$/m);
    expect(operations).toContain(`npm run start:<${processNames.join("|")}>`);
    for (const d of deployments) {
      expect(d.metadata.name).toBe(`replay-${processOf(d)}`);
      expect(container(d).args).toEqual([processOf(d)]);
      expect(container(d).command).toBeUndefined();
      expect(container(d).image).toBe(container(deployments[0] as K8sObject).image);
    }
  });

  it("sets only variables the configuration reads and the operations contract or docs/configuration.md documents", () => {
    for (const d of deployments) {
      const env = containerEnv(d, objects, SECRET_PLACEHOLDERS);
      // What the configuration really asks the environment for, when this process starts.
      const read = new Set<string>();
      const watched = new Proxy(env, {
        get: (target, key) => {
          if (typeof key === "string") read.add(key);
          return target[key as string];
        },
      });
      loadConfig(watched, processOf(d), mountedFile);
      for (const name of Object.keys(env)) {
        expect(read.has(name), `${name} (${d.metadata.name}) read by lib/config.ts`).toBe(true);
        const documented = operations.includes(`\`${name}\``) || documentedVariables.includes(`\`${name}\``);
        expect(documented, `${name} (${d.metadata.name}) in operations.md or docs/configuration.md`).toBe(true);
      }
    }
  });

  it("listens where its ports, probes and Services say, and the configuration accepts every value", () => {
    for (const d of deployments) {
      const name = processOf(d);
      const config = loadConfig(containerEnv(d, objects, SECRET_PLACEHOLDERS), name, mountedFile);
      const ports = Object.fromEntries(
        (container(d).ports as { name: string; containerPort: number }[]).map((p) => [p.name, p.containerPort]),
      );
      expect(config.http.host).toBe("0.0.0.0");
      expect(config.internal.token).toBeDefined();
      const probes = ["startupProbe", "readinessProbe", "livenessProbe"].map((probe) => container(d)[probe]);
      if (name === "gateway") {
        expect(ports).toEqual({ http: config.http.port, internal: config.http.internalPort });
        expect(operations).toMatch(/`GET \/healthz`.*`GET \/readyz`/);
        expect(probes.map((p) => `${p.httpGet.path} ${p.httpGet.port}`)).toEqual([
          "/healthz http",
          "/readyz http",
          "/healthz http",
        ]);
      } else {
        expect(ports).toEqual({ grpc: config.http.port });
        expect(operations).toContain("grpc.health.v1.Health/Check");
        for (const probe of probes) expect(probe.grpc).toEqual({ port: config.http.port });
      }
      // Every Service URL the gateway is given is a Service of this render, on its port.
      for (const [service, url] of Object.entries(config.serviceUrls)) {
        const { hostname, port } = new URL(url);
        const target = ofKind("Service").find((s) => s.metadata.name === hostname);
        expect(target, `${service.toUpperCase()}_URL ${url}`).toBeDefined();
        expect(target?.spec.ports.map((p: { port: number }) => p.port)).toContain(Number(port));
        expect(target?.spec.selector["app.kubernetes.io/component"]).toBe(service);
      }
    }
  });

  it("gives every Service, PodDisruptionBudget and autoscaler a Deployment, and the gateway no autoscaler", () => {
    const podsOf = (selector: Record<string, string>) =>
      deployments.filter((d) => matches(selector, d.spec.template.metadata.labels));
    for (const service of ofKind("Service")) {
      const [target, ...more] = podsOf(service.spec.selector);
      expect(target && more.length === 0, `Service ${service.metadata.name} selects one Deployment`).toBe(true);
      const named = (container(target as K8sObject).ports as { name: string }[]).map((p) => p.name);
      for (const port of service.spec.ports) expect(named).toContain(port.targetPort);
    }
    for (const d of deployments) {
      const budgets = ofKind("PodDisruptionBudget").filter((b) => podsOf(b.spec.selector.matchLabels).includes(d));
      expect(budgets, `PodDisruptionBudget of ${d.metadata.name}`).toHaveLength(1);
      expect(matches(d.spec.selector.matchLabels, d.spec.template.metadata.labels)).toBe(true);
    }
    const scaled = ofKind("HorizontalPodAutoscaler")
      .map((h) => h.spec.scaleTargetRef.name)
      .sort();
    expect(scaled).toEqual(["replay-markers", "replay-replays", "replay-servers", "replay-webhooks"]);
  });

  it("drains within the grace period, runs unprivileged on a read-only root, and mounts no API token", () => {
    for (const d of deployments) {
      const pod = d.spec.template.spec;
      const preStop = container(d).lifecycle.preStop.sleep.seconds;
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + DRAIN_SECONDS);
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true });
      expect(container(d).securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ["ALL"] },
      });
      expect(container(d).resources.limits.memory).toBeDefined();
      expect(container(d).resources.requests.cpu).toBeDefined();
    }
  });

  it("lets only the gateway's public port take outside traffic, and the webhook worker no private range", () => {
    const policies = ofKind("NetworkPolicy");
    const open = policies.flatMap((p) =>
      (p.spec.ingress ?? [])
        .filter((rule: { from?: unknown[] }) => !rule.from)
        .map((rule: { ports: { port: number }[] }) => `${p.metadata.name}:${rule.ports.map((port) => port.port)}`),
    );
    expect(open).toEqual(["replay-gateway:8080"]);
    for (const d of deployments) {
      const labels = d.spec.template.metadata.labels;
      const covering = (type: string) =>
        policies.filter((p) => p.spec.policyTypes.includes(type) && matches(p.spec.podSelector.matchLabels, labels));
      expect(covering("Ingress").length, `ingress policy of ${d.metadata.name}`).toBeGreaterThan(0);
      expect(covering("Egress").length, `egress policy of ${d.metadata.name}`).toBeGreaterThan(0);
      const internet = covering("Egress").flatMap((p) =>
        p.spec.egress.flatMap((rule: { to?: { ipBlock?: { cidr: string; except?: string[] } }[] }) =>
          (rule.to ?? []).filter((to) => to.ipBlock?.cidr === "0.0.0.0/0").map((to) => to.ipBlock),
        ),
      );
      const process = processOf(d);
      if (process === "webhooks" || process === "replays") {
        for (const block of internet) {
          for (const range of ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"]) {
            expect(block?.except, `${d.metadata.name} egress excepts ${range}`).toContain(range);
          }
        }
        expect(internet.length).toBeGreaterThan(0);
      } else {
        expect(internet, `${d.metadata.name} reaches no internet`).toEqual([]);
      }
    }
  });

  it("reaches Postgres over TLS, checked against CloudNativePG's CA, whose private key no pod mounts", () => {
    for (const d of deployments) {
      const env = containerEnv(d, objects, SECRET_PLACEHOLDERS);
      const pod = d.spec.template.spec;
      const mount = (container(d).volumeMounts ?? []).find((m: { mountPath: string }) =>
        env.DATABASE_CA_FILE?.startsWith(`${m.mountPath}/`),
      );
      expect(mount, `${d.metadata.name}: DATABASE_CA_FILE on a mounted volume`).toBeDefined();
      const volume = (pod.volumes ?? []).find((v: { name: string }) => v.name === mount.name);
      expect(volume.secret.secretName).toBe("replay-db-ca");
      expect(volume.secret.items).toEqual([{ key: "ca.crt", path: "ca.crt" }]);
      expect(env.DATABASE_CA_FILE).toBe(`${mount.mountPath}/ca.crt`);
      expect(loadConfig(env, processOf(d), mountedFile).db.ca).toContain("BEGIN CERTIFICATE");
    }
  });

  it("refers only to Secrets the example lists or CloudNativePG writes", () => {
    const example = parseYaml(readFileSync(join(k8sDir, "overlays", "secrets.example.yaml"), "utf8"));
    const known = new Set([
      ...example.flatMap((s) => Object.keys(s.stringData ?? {}).map((key) => `${s.metadata.name}/${key}`)),
      "replay-db-app/uri",
      "replay-db-ca/ca.crt",
    ]);
    for (const d of deployments) {
      for (const entry of container(d).env ?? []) {
        const ref = entry.valueFrom?.secretKeyRef;
        if (!ref) continue;
        // An optional key (the rotation's INTERNAL_TOKEN_ACCEPTED) is absent most of the time: the
        // operator's guide says when to add it.
        if (ref.optional) expect(deployReadme).toContain(`\`${ref.key}\``);
        else expect(known, `${d.metadata.name} ${entry.name}`).toContain(`${ref.name}/${ref.key}`);
      }
      for (const volume of d.spec.template.spec.volumes ?? []) {
        if (volume.secret) {
          expect([...known].some((k) => k.startsWith(`${volume.secret.secretName}/`))).toBe(true);
        }
      }
      for (const from of container(d).envFrom ?? []) {
        if (from.secretRef) expect(from.secretRef.optional, `${from.secretRef.name} is optional`).toBe(true);
      }
    }
  });
});
