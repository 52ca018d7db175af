import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { signRequest } from "../lib/signing.js";
import { pollUntil } from "./poll.js";
import type { SystemHandle } from "./system.js";

export type Res = { status: number; headers: Headers; text: string; body: any };

/** One HTTP request; `body` is JSON-encoded unless `rawBody` gives the exact bytes. */
export async function send(
  baseUrl: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: unknown; rawBody?: string | Buffer } = {},
): Promise<Res> {
  const bytes = opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  const headers = { ...(bytes !== undefined ? { "content-type": "application/json" } : {}), ...opts.headers };
  const res = await fetch(baseUrl + path, {
    method,
    headers,
    body: bytes,
    redirect: "manual",
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/**
 * Polls GET /v1/api/servers with `headers` (a key just revoked at `revokedAt`, performance.now())
 * until it is refused. Returns that answer and how long after the revocation the last request
 * still accepted was sent: decisions.md §2's "within 1 second" bounds when a request arrives, so
 * it is measured from when each was sent, not from when its answer came back (on a busy machine an
 * answer alone can take a second).
 */
export async function pollUntilRevoked(
  baseUrl: string,
  headers: Record<string, string>,
  revokedAt: number,
): Promise<{ refused: Res; lastAcceptedSentMs: number }> {
  let lastAcceptedSentMs = 0;
  const refused = await pollUntil(
    async () => {
      const sentAt = performance.now();
      const res = await send(baseUrl, "GET", "/v1/api/servers", { headers });
      if (res.status === 200) lastAcceptedSentMs = sentAt - revokedAt;
      return res;
    },
    (res) => res.status !== 200,
    30_000,
    20,
  );
  return { refused, lastAcceptedSentMs };
}

export type Signer = { tenant: string; kid: string; secret: string };

/** A signed request (FV1-HMAC-SHA256) through lib/signing, the helper the README documents. */
export function sendSigned(
  baseUrl: string,
  signer: Signer,
  method: string,
  path: string,
  opts: { body?: unknown; rawBody?: string; nonce?: string; ts?: number; headers?: Record<string, string> } = {},
): Promise<Res> {
  const raw = opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  const { authorization } = signRequest({
    ...signer,
    method,
    url: baseUrl + path,
    body: raw,
    nonce: opts.nonce,
    ts: opts.ts,
  });
  return send(baseUrl, method, path, { rawBody: raw, headers: { authorization, ...opts.headers } });
}

export const ALL_SCOPES = ["replays:read", "replays:write", "servers:read", "servers:write", "collections:write"];

/** A fresh tenant with an owner, an all-scopes key bound to it and a signing key, through the admin API. */
export async function provisionTenant(
  sys: Pick<SystemHandle, "admin">,
  plan: {
    rateLimitRps?: number;
    rateLimitBurst?: number;
    serverLimit?: bigint;
    storageQuotaBytes?: bigint;
    retentionDays?: number;
    hotDays?: number;
  } = {},
) {
  const { tenantId } = await sys.admin.createTenant({ name: `e2e-${randomUUID().slice(0, 8)}`, ...plan });
  const { memberId: ownerId } = await sys.admin.addMember({ tenantId, role: MemberRole.OWNER });
  const { keyId, key } = await sys.admin.createApiKey({ tenantId, memberId: ownerId, scopes: ALL_SCOPES });
  const { kid, secret } = await sys.admin.createSigningKey({ tenantId });
  const signer: Signer = { tenant: tenantId, kid, secret };
  return {
    tenantId,
    ownerId,
    keyId,
    key,
    signer,
    bearer: (k = key) => ({ authorization: `Bearer ${k}` }),
    async mintKey(scopes: string[], memberId: string | null = ownerId) {
      return sys.admin.createApiKey({ tenantId, memberId: memberId ?? "", scopes });
    },
  };
}

/**
 * One HTTP/1.1 request written byte for byte, for what fetch cannot send: repeated header lines, a
 * body on GET. `body` goes with Content-Length, or chunked when `chunked` is set. Resolves to the
 * status, content type and body of the answer.
 */
export function rawRequest(
  baseUrl: string,
  requestLine: string,
  headerLines: string[],
  opts: { body?: Buffer; chunked?: boolean } = {},
): Promise<{ status: number; contentType: string; requestId: string | undefined; body: string }> {
  const { hostname, port } = new URL(baseUrl);
  const framing =
    opts.body === undefined
      ? []
      : opts.chunked
        ? ["Transfer-Encoding: chunked"]
        : [`Content-Length: ${opts.body.length}`];
  const payload =
    opts.body === undefined
      ? Buffer.alloc(0)
      : opts.chunked
        ? // An empty body is the last chunk alone: a zero-size chunk before it would end the body
          // early and leave the rest to be read as another request.
          opts.body.length === 0
          ? Buffer.from("0\r\n\r\n")
          : Buffer.concat([
              Buffer.from(`${opts.body.length.toString(16)}\r\n`),
              opts.body,
              Buffer.from("\r\n0\r\n\r\n"),
            ])
        : opts.body;
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      // write, not end: a half-closed client connection may be dropped before the answer.
      const head = [`${requestLine} HTTP/1.1`, `Host: ${hostname}`, ...headerLines, ...framing, "Connection: close"];
      socket.write(Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`), payload]));
    });
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("end", () => {
      // Interim answers (100 Continue to an Expect header) come first; the final one is what counts.
      const text = Buffer.concat(chunks)
        .toString("utf8")
        .replace(/^(?:HTTP\/1\.1 1\d\d[^\r]*\r\n(?:[^\r]+\r\n)*\r\n)+/, "");
      const at = text.indexOf("\r\n\r\n");
      const head = at === -1 ? text : text.slice(0, at);
      const raw = at === -1 ? "" : text.slice(at + 4);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      const contentType = /^content-type: *(.*)$/im.exec(head)?.[1]?.trim() ?? "";
      const requestId = /^x-request-id: *(.*)$/im.exec(head)?.[1]?.trim();
      // A chunked answer is unwrapped (our answers are small: one chunk and the last).
      const body = /^transfer-encoding: *chunked/im.test(head)
        ? raw.replace(/^[0-9a-f]+\r\n/i, "").replace(/\r\n0\r\n\r\n$/, "")
        : raw;
      resolve({ status, contentType, requestId, body });
    });
  });
}
