// The README and docs/ are read from a fresh clone of this repository alone: every relative link
// must reach a file (and heading) in it, none may lead outside (the contract's folder is named in
// the README instead), every variable the code reads is documented, and every command the docs
// name exists.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadConfig, processNames } from "../lib/config.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const docs = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];
const text = (path: string) => readFileSync(join(root, path), "utf8");

/** A Markdown text without its fenced code blocks, where `[a](b)` is code, not a link. */
const prose = (markdown: string) => markdown.replace(/^```[\s\S]*?^```$/gm, "");

/** The targets of the inline links `[text](target)` of a Markdown text. */
function linkTargets(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] as string);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .trim()
    .replace(/\s/g, "-");
}

function anchors(markdown: string): Set<string> {
  return new Set([...prose(markdown).matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => anchorOf(m[1] as string)));
}

describe("the README and docs/", () => {
  it.each(docs)("%s: every relative link reaches a file (and heading) in the repository", (path) => {
    const broken: string[] = [];
    for (const target of linkTargets(text(path))) {
      if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto:: not a file of ours
      const [file = "", anchor] = target.split("#", 2);
      const resolved = file === "" ? join(root, path) : resolve(root, dirname(path), file);
      const inside = relative(root, resolved);
      if (inside.startsWith("..") || !existsSync(resolved)) {
        broken.push(`${target} (${inside})`);
        continue;
      }
      if (anchor !== undefined && resolved.endsWith(".md") && !anchors(readFileSync(resolved, "utf8")).has(anchor))
        broken.push(`${target} (no heading #${anchor})`);
    }
    expect(broken).toEqual([]);
  });

  it("name no file outside the repository by a ../ path", () => {
    const outside = docs.filter((path) => /\]\(\.\.\/|`\.\.\/shared\//.test(prose(text(path))));
    expect(outside).toEqual([]);
  });

  it("document every variable the configuration reads, in docs/configuration.md's table", () => {
    const read = new Set<string>(["REPLAYCTL_URL", "REPLAYCTL_TOKEN"]); // replayctl's own (cli/main.ts)
    const envs: Record<string, string>[] = [
      {},
      { DATABASE_URL: "postgres://replay@db/replay", NATS_URL: "nats://nats:4222" },
    ];
    for (const env of envs) {
      for (const processName of [undefined, ...processNames]) {
        const watched = new Proxy<Record<string, string>>(env, {
          get: (target, key) => {
            if (typeof key === "string") read.add(key);
            return target[key as string];
          },
        });
        try {
          loadConfig(watched, processName, () => "k".repeat(32));
        } catch {
          // A process on its own refuses the embedded settings; what it read still counts.
        }
      }
    }
    const configuration = text("docs/configuration.md");
    const table = configuration.slice(
      configuration.indexOf("## Variables"),
      configuration.indexOf("## Start and stop"),
    );
    const undocumented = [...read].filter((name) => !table.includes(`\`${name}\``));
    expect(read.size).toBeGreaterThan(30);
    expect(undocumented).toEqual([]);
  });

  it("name only npm scripts and benchmarks that exist", () => {
    const scripts = Object.keys(JSON.parse(text("package.json")).scripts as Record<string, string>);
    // The benchmarks `npm run bench` knows: the keys of test/bench/run.ts's table.
    const benchmarks = [...text("test/bench/run.ts").matchAll(/^ {2}"?([\w-]+)"?: \(\) => import/gm)].map((m) => m[1]);
    const all = docs.map(text).join("\n");
    const named = [...all.matchAll(/`npm run ([a-z][\w:-]*)(?: ([a-z][\w-]*))?/g)]; // as code in the prose
    expect(named.length).toBeGreaterThan(5);
    for (const [phrase, script, arg] of named) {
      if (script?.startsWith("start:")) continue; // the `start:<name>` pattern, checked below
      expect(scripts, phrase).toContain(script);
      if (script === "bench" && arg !== undefined) expect(benchmarks, phrase).toContain(arg);
    }
    for (const name of processNames) expect(scripts).toContain(`start:${name}`);
    const [firstBlock] = text("README.md").match(/^```sh\n[\s\S]*?^```$/m) ?? [];
    expect(firstBlock).toContain("npm ci && npm start");
    expect(firstBlock).toContain("npm test");
    expect(scripts).toEqual(expect.arrayContaining(["start", "test", "prepare"]));
  });
});
