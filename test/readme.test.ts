// The README's request-signing example is what a user without TypeScript runs: it must be the
// file examples/sign-request.mjs word for word, and that file, run by plain `node`, must get a 200.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { provisionTenant } from "./http.js";
import { sharedSystems } from "./shared-system.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const EXAMPLE = "examples/sign-request.mjs";

/** The contents of every ```js fenced block in a Markdown text, each with its final newline. */
function jsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

describe("README: signing a request", () => {
  it(`shows ${EXAMPLE} verbatim`, () => {
    const example = readFileSync(join(root, EXAMPLE), "utf8");
    const blocks = jsBlocks(readFileSync(join(root, "README.md"), "utf8"));
    expect(blocks, "a ```js block in README.md that is the example file").toContain(example);
  });

  describe.each(sharedSystems())("$mode system", (sys) => {
    it("the example, run with plain node, gets 200 for a signed GET /v1/replays", async () => {
      const tenant = await provisionTenant(sys);
      const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? "",
          REPLAY_URL: sys.baseUrl,
          TENANT_ID: tenant.signer.tenant,
          KID: tenant.signer.kid,
          SECRET: tenant.signer.secret,
        },
        timeout: 20_000,
      });
      expect(stdout).toMatch(/^200 \{"results":\[\],/);
    });
  });
});
