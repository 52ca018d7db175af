import { execFile } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parseAllDocuments } from "yaml";

// The Kubernetes manifests as a cluster would receive them: rendered by `kubectl kustomize`, each
// object checked against the Kubernetes (and CRD) schemas of the kubernetes-models packages, and
// against their TypeScript types, which reject a field the schema does not have (the schemas let
// unknown fields through, as the API server's non-strict decoding does; kubectl's strict field
// validation would refuse them).

const run = promisify(execFile);
export const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
export const k8sDir = join(root, "deploy", "k8s");

export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  // A manifest is whatever YAML says; each test reads what it needs.
  [field: string]: any;
};

/** `kubectl kustomize <deploy/k8s/dir>`: the objects in the order kustomize prints them. */
export async function render(dir: string): Promise<K8sObject[]> {
  const { stdout } = await run("kubectl", ["kustomize", join(k8sDir, dir)], { maxBuffer: 16 * 2 ** 20 }).catch(
    async (err: Error & { code?: string; stderr?: string }) => {
      const version = await run("kubectl", ["version", "--client"]).then(
        (r) => r.stdout.trim().replace(/\n/g, "; "),
        () => "kubectl not found",
      );
      throw new Error(
        `kubectl kustomize ${dir} failed (${version}; deploy/k8s needs kustomize v4 or later): ${err.stderr ?? err.message}`,
      );
    },
  );
  return parseYaml(stdout);
}

export function parseYaml(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as K8sObject | null)
    .filter((obj): obj is K8sObject => obj !== null);
}

/** Where each API group's models live. */
const MODELS: Record<string, string> = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "policy/v1": "kubernetes-models/policy/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
  "postgresql.cnpg.io/v1": "@kubernetes-models/cloudnative-pg/postgresql.cnpg.io/v1",
};

/** Schema problems of each object ("Deployment/replay-gateway: ..."); empty when all are valid. */
export async function schemaProblems(objects: readonly K8sObject[]): Promise<string[]> {
  const problems: string[] = [];
  for (const obj of objects) {
    const where = `${obj.kind}/${obj.metadata?.name}`;
    const module = MODELS[obj.apiVersion];
    if (!module) {
      problems.push(`${where}: no schema for apiVersion ${obj.apiVersion}`);
      continue;
    }
    const models = (await import(module)) as Record<string, new (data: unknown) => { validate(): void }>;
    const Model = models[obj.kind];
    if (!Model) {
      problems.push(`${where}: ${obj.apiVersion} has no kind ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (err) {
      problems.push(`${where}: ${(err as Error).message}`);
    }
  }
  return problems;
}

/**
 * Type errors of each object against its model's TypeScript interface, unknown fields included
 * (excess property checks reach every nested literal): the native `tsc` on a generated file.
 */
export async function typeProblems(objects: readonly K8sObject[], label: string): Promise<string[]> {
  const dir = join(root, "node_modules", ".cache", "k8s-types", label);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  // Each object's first line in the file, to name it in an error.
  const starts: { line: number; name: string }[] = [];
  let line = 1;
  const chunks = objects.map((obj, i) => {
    const module = MODELS[obj.apiVersion] ?? "kubernetes-models/v1";
    const chunk = `export const o${i}: import("${module}/${obj.kind}").I${obj.kind} = ${JSON.stringify(obj, null, 2)};\n`;
    starts.push({ line, name: `${obj.kind}/${obj.metadata?.name}` });
    line += chunk.split("\n").length - 1;
    return chunk;
  });
  await writeFile(join(dir, "manifests.ts"), chunks.join(""));
  await writeFile(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        module: "nodenext",
        moduleResolution: "nodenext",
        target: "es2022",
        skipLibCheck: true,
        types: [],
      },
      files: ["manifests.ts"],
    }),
  );
  try {
    await run(join(root, "node_modules", ".bin", "tsc"), ["-p", dir], { maxBuffer: 16 * 2 ** 20 });
    return [];
  } catch (err) {
    const output = `${(err as { stdout?: string }).stdout ?? ""}${(err as { stderr?: string }).stderr ?? ""}`;
    return output
      .split("\n")
      .filter((text) => text.includes("error TS"))
      .map((text) => {
        const at = Number(/manifests\.ts\((\d+),/.exec(text)?.[1] ?? 0);
        const owner = starts.findLast((start) => start.line <= at)?.name ?? "?";
        return `${owner}: ${text.replace(/^.*?error /, "")}`;
      });
  }
}

/**
 * A Deployment's (first) container environment as the kubelet builds it: its ConfigMaps' data,
 * then its own entries, a Secret's value taken from `secrets` by variable name. An optional Secret
 * key with no value given is left unset, as in a pod without it; a required one must be given.
 */
export function containerEnv(
  deployment: K8sObject,
  objects: readonly K8sObject[],
  secrets: Readonly<Record<string, string>>,
): Record<string, string> {
  const container = deployment.spec.template.spec.containers[0];
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (!from.configMapRef) continue;
    const map = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === from.configMapRef.name);
    if (!map) throw new Error(`${deployment.metadata.name}: no ConfigMap ${from.configMapRef.name} in the render`);
    Object.assign(env, map.data);
  }
  for (const entry of container.env ?? []) {
    const value = entry.value ?? secrets[entry.name];
    if (value !== undefined) env[entry.name] = value;
    else if (!entry.valueFrom?.secretKeyRef?.optional) {
      throw new Error(`${deployment.metadata.name}: no value for ${entry.name} (${JSON.stringify(entry.valueFrom)})`);
    }
  }
  return env;
}
