import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import type { Res } from "./http.js";

// ajv-formats is CommonJS: its default export arrives as the module object under NodeNext.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

const SCHEMA_BASE = "https://replay.invalid/schemas/";

/**
 * Checks real responses against an OpenAPI 3.1 document with a standard JSON Schema 2020-12
 * validator (ajv, which is the dialect OpenAPI 3.1 uses): the operation and the status must be in
 * the document, the content type one it lists, and the body valid against its schema. Remembers
 * which operation answered which status, so a test can require that every operation was seen.
 */
export function openApiValidator(doc: any) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const rebase = (schema: unknown) =>
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${SCHEMA_BASE}`));
  for (const [name, schema] of Object.entries(doc.components.schemas))
    ajv.addSchema(rebase(schema), SCHEMA_BASE + name);
  const compiled = new Map<string, ValidateFunction>();
  const seen = new Set<string>();

  return {
    /** The reasons `res` breaks the document (none when it holds to it). */
    violations(method: string, template: string, res: Res): string[] {
      const where = `${method} ${template} -> ${res.status}`;
      const op = doc.paths[template]?.[method.toLowerCase()];
      if (!op) return [`${where}: no such operation in the document`];
      const response = op.responses[String(res.status)];
      if (!response) return [`${where}: status not in the document (${res.text.slice(0, 200)})`];
      seen.add(`${method} ${template} ${res.status}`);
      if (!response.content) return res.text === "" ? [] : [`${where}: the document gives no body, got ${res.text}`];
      const type = (res.headers.get("content-type") ?? "").split(";")[0]?.trim() ?? "";
      const media = response.content[type];
      if (!media) return [`${where}: content type ${type} not in ${Object.keys(response.content).join(", ")}`];
      const key = `${template} ${method} ${res.status} ${type}`;
      let validate = compiled.get(key);
      if (!validate) {
        validate = ajv.compile(rebase(media.schema));
        compiled.set(key, validate);
      }
      if (validate(res.body)) return [];
      return (validate.errors ?? []).map(
        (e) => `${where}: ${e.instancePath || "/"} ${e.message} (${res.text.slice(0, 300)})`,
      );
    },
    /**
     * The reasons `value` breaks `schema`, a schema of the document (`{ $ref: "#/components/schemas/X" }`
     * or one of its own, refs resolved), such as a webhook delivery's body: none when it holds to it.
     */
    schemaViolations(schema: unknown, value: unknown): string[] {
      const key = JSON.stringify(schema);
      let validate = compiled.get(key);
      if (!validate) {
        validate = ajv.compile(rebase(schema));
        compiled.set(key, validate);
      }
      if (validate(value)) return [];
      return (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message} (${e.schemaPath})`);
    },
    /** "METHOD /path status" of every response checked so far. */
    seen: () => seen,
  };
}
