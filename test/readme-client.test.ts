// README.md's "Client" section as a reader follows it: `npm start` on a fresh DATA_DIR, a new
// TypeScript project in a temporary directory (outside this repository, so nothing resolves from
// our node_modules), the client installed with the section's command as written, and its example,
// taken from the README as it stands, compiled by the project's tsc and run by node with the
// options the banner printed. So the section cannot drift from what works.
import { execFile } from "node:child_process";
import { lstatSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { type BannerClientOptions, bannerClientOptions } from "./banner.js";
import { send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { recordingOnNewServer } from "./recorder.js";
import { type System, startEmbeddedSystem } from "./system.js";
import {
  type ReceivedRequest,
  startWebhookReceiver,
  type WebhookReceiver,
  writeReceiverCertificate,
} from "./webhook-receiver.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");
const section = readme.slice(
  readme.indexOf("\n## Client\n"),
  readme.indexOf("\n## ", readme.indexOf("\n## Client\n") + 1),
);
/** The contents of the section's fenced blocks in `lang`. */
const blocks = (lang: string) =>
  [...section.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1] as string);

/** The section's command, in its prose, that makes a project's later installs copy the package too. */
const keepCopy = () => /`(npm config set install-links[^`]*)`/.exec(section)?.[1] ?? "";

const run = promisify(execFile);

/**
 * npm's words when the registry cannot be reached (no network, a DNS or proxy failure). The install
 * takes the registry's package lists, which a warm cache holds and a fresh machine fetches; without
 * either, the tests that need the project are skipped with that reason: it is the machine's
 * network, not the README, that failed. Any other npm failure fails the test.
 */
const REGISTRY_UNREACHABLE = /\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH)\b/;
const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/**
 * npm as a user runs it in their project: without the variables of the `npm test` that may be
 * running us (they name this repository's package), and with `prefer-offline`, so that it takes
 * what npm's cache holds (this repository's `npm ci` put the packages' tarballs there) and asks the
 * registry only for what the cache lacks. The commands themselves are the README's.
 */
function npmEnv(): Record<string, string> {
  const inherited = Object.entries(process.env).filter(
    ([name]) => !/^(npm_package_|npm_lifecycle_|npm_command$|npm_config_local_prefix$|INIT_CWD$)/.test(name),
  );
  return {
    ...(Object.fromEntries(inherited) as Record<string, string>),
    npm_config_prefer_offline: "true",
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
    // Two quick retries of a failed fetch (npm waits 10 to 60 s between them by default), so that a
    // registry out of reach is known within the test's time.
    npm_config_fetch_retries: "2",
    npm_config_fetch_retry_mintimeout: "1000",
    npm_config_fetch_retry_maxtimeout: "5000",
  };
}

describe("README: the client in a new TypeScript project, against npm start's dev tenant", () => {
  let sys: System;
  let receiver: WebhookReceiver;
  let certDir: string;
  let project: string;
  let options: BannerClientOptions;
  let exampleEnv: Record<string, string>;
  let recording: { serverId: string; replayId: string };
  /** Why the project could not be made, when the registry was out of reach. */
  let unreachable: string | undefined;
  const hookPath = "/hooks/readme-client";

  beforeAll(async () => {
    certDir = await mkdtemp(join(tmpdir(), "replay-readme-client-cert-"));
    project = await mkdtemp(join(tmpdir(), "replay-readme-client-project-"));
    writeReceiverCertificate(certDir);
    receiver = await startWebhookReceiver({ certDir });
    // `npm start` as test/system.ts runs it, plus the one receiver its webhooks may reach (HTTPS,
    // on loopback, trusting the receiver's certificate), as the shared systems are told.
    sys = await startEmbeddedSystem({
      WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${receiver.port}`,
      WEBHOOK_CA_FILE: join(certDir, "cert.pem"),
    });
    options = (await pollUntil(
      async () => bannerClientOptions(sys.output()),
      (found) => found !== undefined,
      30_000,
    )) as BannerClientOptions;
  });

  afterAll(async () => {
    try {
      if (sys) expect(await sys.stop(), sys.output()).toEqual([0]);
    } finally {
      await receiver?.close();
      for (const dir of [certDir, project]) if (dir) await rm(dir, { recursive: true, force: true });
    }
  });

  it("shows one install command, the setting that keeps the copy, and one example", () => {
    expect(blocks("sh")).toEqual(["npm install --install-links /path/to/replay-service/clients/typescript\n"]);
    expect(keepCopy()).toBe("npm config set install-links=true --location=project");
    expect(blocks("ts")).toHaveLength(1);
  });

  it("a new TypeScript project adds the client with that one command, and keeps a copy through npm ci", async (ctx) => {
    const env = npmEnv();
    const npm = (args: string[]) =>
      run("npm", args, { cwd: project, env, timeout: 120_000 }).catch((err: { stderr?: string }) => {
        const code = REGISTRY_UNREACHABLE.exec(err.stderr ?? "")?.[1];
        if (code === undefined) throw err;
        unreachable = `the npm registry is out of reach (${code}) and npm's cache lacks what the project needs`;
        return ctx.skip(unreachable);
      });
    // A TypeScript project for Node, as the section describes it, with the TypeScript and Node
    // types this repository uses (npm ci put them in the cache).
    const { devDependencies } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    await writeFile(join(project, "package.json"), `${JSON.stringify({ name: "new-project", type: "module" })}\n`);
    await npm([
      "install",
      "--save-dev",
      `typescript@${devDependencies.typescript}`,
      `@types/node@${devDependencies["@types/node"]}`,
    ]);
    await run("npx", ["tsc", "--init"], { cwd: project, env });
    const tsconfig = readFileSync(join(project, "tsconfig.json"), "utf8");
    expect(tsconfig, 'tsc --init\'s tsconfig.json, whose types [] the section makes ["node"]').toContain(
      '"types": [],',
    );
    await writeFile(join(project, "tsconfig.json"), tsconfig.replace('"types": [],', '"types": ["node"],'));

    const [install] = blocks("sh");
    const [command, ...args] = (install as string).trim().split(" ");
    expect(command).toBe("npm");
    await npm(args.map((arg) => arg.replace("/path/to/replay-service/", root)));
    const installed = join(project, "node_modules", "@replay", "client");
    expect(lstatSync(installed).isDirectory(), "a copy, not a link to the checkout").toBe(true);
    expect(JSON.parse(readFileSync(join(project, "package.json"), "utf8")).dependencies).toHaveProperty(
      "@replay/client",
    );

    // The project's later installs keep the copy once the section's setting is made.
    const [npmAgain, ...setting] = keepCopy().split(" ");
    expect(npmAgain).toBe("npm");
    await npm(setting);
    await rm(join(project, "node_modules"), { recursive: true });
    await npm(["ci"]);
    expect(lstatSync(installed).isDirectory(), "npm ci: a copy, not a link to the checkout").toBe(true);
    expect(lstatSync(join(installed, "dist", "index.js")).isFile()).toBe(true);
  });

  it("the example compiles with the project's tsc and lists servers, makes a marker by server id, lists replays", async (ctx) => {
    if (unreachable) ctx.skip(unreachable);
    const bearer = { authorization: `Bearer ${options.apiKey}` };
    // A server of the dev tenant that is recording: made through the public API, checked in and
    // started over gRPC as a recorder does.
    recording = await recordingOnNewServer(sys, bearer, "readme-recording");
    // Markers by server id follow the recording's start through the event bus: wait until it is known.
    await pollUntil(
      () =>
        send(sys.baseUrl, "POST", "/v1/api/timeline-events", {
          headers: bearer,
          body: { serverId: recording.serverId, tick: 1, label: "known" },
        }),
      (res) => res.status === 201,
      30_000,
    );
    const subscribed = await sendSigned(sys.baseUrl, options.signingKey, "POST", "/v1/webhooks", {
      body: { url: receiver.url(hookPath), events: ["collection.finalized"] },
    });
    expect(subscribed.status, subscribed.text).toBe(201);
    exampleEnv = {
      PATH: process.env.PATH ?? "",
      REPLAY_URL: options.baseUrl,
      REPLAY_API_KEY: options.apiKey,
      TENANT_ID: options.signingKey.tenant,
      KID: options.signingKey.kid,
      SECRET: options.signingKey.secret,
      SERVER_ID: recording.serverId,
      WEBHOOK_SECRET: subscribed.body.secret,
    };

    await writeFile(join(project, "example.ts"), blocks("ts")[0] as string);
    await run("npx", ["tsc"], { cwd: project, env: npmEnv(), timeout: 120_000 });
    const { stdout } = await run(process.execPath, ["example.js"], { cwd: project, env: exampleEnv, timeout: 30_000 });
    expect(stdout).toContain(`server ${recording.serverId} readme-recording online\n`);
    expect(stdout).toMatch(new RegExp(`^marker ${UUID} on replay ${recording.replayId}$`, "m"));
    expect(stdout).toContain(`replay ${recording.replayId} recording\n`);
    expect(stdout).not.toContain("webhook");
  });

  it("its onDelivery verifies a real delivery as the receiver got it, and refuses a tampered copy", async (ctx) => {
    if (unreachable) ctx.skip(unreachable);
    const grpc = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
    await grpc.finishRecording({ replayId: recording.replayId }).catch((err) => {
      throw ConnectError.from(err);
    });
    const [delivery] = await receiver.waitForRequests(hookPath, 1, 30_000);
    const { raw, headers } = delivery as ReceivedRequest;
    // A receiver's handler as a reader writes one: import the example's function and hand it each
    // POST's raw body and headers (this also runs the example's calls once more).
    const receiverCode = `
      import { onDelivery } from "./example.js";
      const raw = Buffer.from(process.env.DELIVERY_BODY, "base64");
      const headers = JSON.parse(process.env.DELIVERY_HEADERS);
      console.log("real:", onDelivery(raw, headers));
      console.log("tampered:", onDelivery(Buffer.from(raw.toString().replace("finalized", "finalised")), headers));
    `;
    const { stdout } = await run(process.execPath, ["--input-type=module", "--eval", receiverCode], {
      cwd: project,
      env: { ...exampleEnv, DELIVERY_BODY: raw.toString("base64"), DELIVERY_HEADERS: JSON.stringify(headers) },
      timeout: 30_000,
    });
    expect(stdout).toContain(`webhook collection.finalized ${headers["x-fv-event-id"]}\n`);
    expect(stdout).toContain("real: true\n");
    expect(stdout).toContain("tampered: false\n");
  });
});
