import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { validate } from "@scalar/openapi-parser";
import { describe, expect, it } from "vitest";
import { errorCodes } from "../../lib/errors.js";
import { WEBHOOK_EVENTS } from "../../lib/vocabulary.js";
import { publishedDocumentText } from "./published.js";

const committed = fileURLToPath(new URL("../../openapi.json", import.meta.url));
const text = publishedDocumentText();
const doc = JSON.parse(text);
const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, methods]) =>
  Object.entries(methods).map(([method, op]) => ({ path, method, op })),
);

describe("the API reference (openapi.json)", () => {
  it("is committed as the route table gives it (run `npm run openapi` after changing a route)", () => {
    expect(readFileSync(committed, "utf8") === text, "openapi.json is stale: run `npm run openapi`").toBe(true);
  });

  it("passes an independent OpenAPI 3.1 validator", async () => {
    const result = await validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(result.version).toBe("3.1");
  });

  it("has every route once, each with a unique operationId, its path parameters and its security", () => {
    expect(operations.length).toBe(26);
    expect(new Set(operations.map((o) => o.op.operationId)).size).toBe(operations.length);
    for (const { path, method, op } of operations) {
      const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      const declared = (op.parameters ?? [])
        .filter((p: any) => p.in === "path")
        .map((p: any) => p.name)
        .sort();
      expect(declared, `${method} ${path}`).toEqual(inPath);
      expect(op.security, `${method} ${path}`).toHaveLength(1);
    }
  });

  it("names each problem code under the status the error table gives it, with an example of each", () => {
    for (const { path, method, op } of operations) {
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        const content = response.content?.["application/problem+json"];
        if (!content) continue;
        const codes: string[] = content.schema.allOf[1].properties.code.enum;
        for (const code of codes) {
          expect(errorCodes[code as keyof typeof errorCodes]?.status, `${method} ${path} ${code}`).toBe(Number(status));
          expect(doc.components.examples[code].value.code).toBe(code);
        }
      }
    }
  });

  it("documents each of the eight events as a webhook", () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...WEBHOOK_EVENTS].sort());
  });
});
