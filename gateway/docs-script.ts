// The API reference page's script (3.5 MB, from @scalar/fastify-api-reference), served from Buffers
// made once per process: as it is, gzip and brotli, with an ETag. A Buffer goes to the socket by
// reference, so a hundred clients that never read their answers share one copy; the plugin's own
// route sends a string, which Node copies into every answer still waiting to be written.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import type { FastifyReply, FastifyRequest } from "fastify";

/** Where the page (routePrefix /docs) loads its script from: the plugin's route, answered here. */
export const DOCS_SCRIPT_PATH = "/docs/js/scalar.js";

export type DocsScript = { identity: Buffer; gzip: Buffer; br: Buffer; etag: string };

/**
 * The script, read from the package (its `exports` give only its entry; the script sits beside it
 * as dist/js/standalone.js, where the plugin reads it too) and compressed off the event loop.
 */
export async function loadDocsScript(): Promise<DocsScript> {
  const entry = createRequire(import.meta.url).resolve("@scalar/fastify-api-reference");
  const identity = await readFile(join(dirname(entry), "js", "standalone.js"));
  const [gzipped, brotli] = await Promise.all([
    promisify(gzip)(identity, { level: 9 }),
    // Quality 9 of 11: nearly the size of 11 in a small part of its time, once per process start
    // (docs/performance.md).
    promisify(brotliCompress)(identity, {
      params: { [constants.BROTLI_PARAM_QUALITY]: 9, [constants.BROTLI_PARAM_SIZE_HINT]: identity.length },
    }),
  ]);
  const etag = `"${createHash("sha256").update(identity).digest("base64url").slice(0, 27)}"`;
  return { identity, gzip: gzipped, br: brotli, etag };
}

/**
 * 304 when the client holds this version (If-None-Match), else the script in the best encoding the
 * client accepts. `no-cache`: the name carries no version, so a browser asks again each time and
 * gets a 304 without a body until an upgrade changes the script.
 */
export function sendDocsScript(req: FastifyRequest, reply: FastifyReply, script: DocsScript): FastifyReply {
  reply.header("etag", script.etag).header("cache-control", "public, no-cache").header("vary", "accept-encoding");
  const known = req.headers["if-none-match"];
  if (known?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === script.etag)) {
    return reply.code(304).send();
  }
  reply.type("application/javascript; charset=utf-8");
  const encoding = preferredEncoding(req.headers["accept-encoding"]);
  if (encoding !== "identity") reply.header("content-encoding", encoding);
  return reply.send(script[encoding]);
}

/** br, then gzip, then identity: the first the Accept-Encoding header allows (q above 0). */
export function preferredEncoding(header: string | undefined): "br" | "gzip" | "identity" {
  const accepted = new Map<string, number>();
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.split(";").map((piece) => piece.trim().toLowerCase());
    if (!name) continue;
    const q = params.find((param) => param.startsWith("q="));
    accepted.set(name, q === undefined ? 1 : Number(q.slice(2)) || 0);
  }
  const allows = (name: string) => (accepted.get(name) ?? accepted.get("*") ?? 0) > 0;
  if (allows("br")) return "br";
  if (allows("gzip")) return "gzip";
  return "identity";
}
