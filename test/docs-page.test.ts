import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { describe, expect, it } from "vitest";
import { send } from "./http.js";
import { sharedSystems } from "./shared-system.js";

// The documentation page (GET /docs) in a real headless browser: it renders the document the gateway
// serves, with every route and the signing scheme on it. Debian's chromium (.ci/run installs it);
// without it, outside CI, the test is skipped with its reason.

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
if (missing && process.env.CI)
  throw new Error(`CI needs ${CHROMIUM} for the documentation page test (apt-get install chromium)`);

describe.skipIf(missing)(`the documentation page${missing ? ` (skipped: no browser at ${CHROMIUM})` : ""}`, () => {
  const [sys] = sharedSystems();

  it("renders every route of the document and the signing scheme, with no network beyond the gateway", async () => {
    if (!sys) throw new Error("no shared system");
    const doc = (await send(sys.baseUrl, "GET", "/openapi.json")).body;
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      // As root in a sandbox with a closed network: no Chromium sandbox, no background connections.
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    try {
      const page = await browser.newPage();
      const outside: string[] = [];
      const errors: string[] = [];
      page.on("request", (req) => {
        if (!req.url().startsWith(sys.baseUrl) && !req.url().startsWith("data:")) outside.push(req.url());
      });
      page.on("pageerror", (err) => errors.push(err.message));
      await page.goto(`${sys.baseUrl}/docs`, { waitUntil: "networkidle" });
      const routes = Object.entries(doc.paths as Record<string, object>).flatMap(([path, methods]) =>
        Object.keys(methods).map((method) => ({ method: method.toUpperCase(), path })),
      );
      expect(routes).toHaveLength(26);
      // Each tag lists its operations as "METHOD path"; the page renders sections as they scroll
      // into view, so scroll until every path is on it.
      let text = "";
      const deadline = Date.now() + 20_000;
      while (!routes.every(({ path }) => text.includes(path)) && Date.now() < deadline) {
        await page.mouse.move(600, 400);
        await page.mouse.wheel(0, 5000);
        await page.waitForTimeout(200);
        text = await page.evaluate<string>("document.body.innerText");
      }
      for (const { method, path } of routes) {
        const shown = method === "DELETE" ? "(DELETE|DEL)" : method;
        expect(text, `${method} ${path}`).toMatch(new RegExp(`${shown}\\s+${path.replace(/[{}]/g, "\\$&")}(\\s|$)`));
      }
      expect(text).toContain("FV1-HMAC-SHA256");
      expect(text).toContain("Request signing");
      expect(errors).toEqual([]);
      expect(outside).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
