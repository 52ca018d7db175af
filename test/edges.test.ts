// Requests a well-behaved client never sends, each of which once leaked a framework answer, a 500
// or a wrong code (issue "Nobody gets in through the side door"). Every answer must be the contract's
// problem+json with an X-Request-Id, in the check order of decisions.md (404/405, then 401, ...).
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { expectProblem } from "./expect.js";
import { provisionTenant, send } from "./http.js";
import { sharedSystems } from "./shared-system.js";

type Raw = { status: number; headers: Record<string, string>; body: any; closedAfterMs: number; firstByteMs: number };

/** Writes `bytes` on a fresh connection (optionally more later) and reads the answer until the server closes. */
function exchange(baseUrl: string, bytes: string | Buffer, opts: { timeoutMs?: number } = {}): Promise<Raw> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let firstByteMs = -1;
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(bytes));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${opts.timeoutMs ?? 10_000} ms: ${Buffer.concat(chunks).toString()}`));
    }, opts.timeoutMs ?? 10_000);
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => {
      if (firstByteMs < 0) firstByteMs = Date.now() - started;
      chunks.push(chunk);
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString("utf8");
      const at = text.indexOf("\r\n\r\n");
      const head = text.slice(0, at === -1 ? text.length : at).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      let body: unknown;
      try {
        body = JSON.parse(at === -1 ? "" : text.slice(at + 4));
      } catch {
        body = undefined;
      }
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head[0] ?? "")?.[1]),
        headers,
        body,
        closedAfterMs: Date.now() - started,
        firstByteMs,
      });
    });
  });
}

function expectRawProblem(res: Raw, status: number, code: string): void {
  expect({ status: res.status, code: res.body?.code }, JSON.stringify(res)).toEqual({ status, code });
  expect(res.headers["content-type"]).toMatch(/^application\/problem\+json/);
  expect(res.headers["x-request-id"]).toMatch(/^[\x21-\x7e]{1,128}$/);
  expect(res.body.instance).toBe(res.headers["x-request-id"]);
}

for (const sys of sharedSystems()) {
  describe(`hostile requests at the edge (${sys.mode})`, () => {
    it("a path that does not percent-decode is routed like any other: 404 unknown, 401 then the id code on a route", async () => {
      expectProblem(await send(sys.baseUrl, "GET", "/%FF"), 404, "NOT_FOUND");
      expectProblem(await send(sys.baseUrl, "DELETE", "/v1/api/servers/%E0%A4%A"), 401, "UNAUTHENTICATED");
      expectProblem(await send(sys.baseUrl, "GET", "/v1/replays/%E0%A4%A"), 401, "UNAUTHENTICATED");
      const t = await provisionTenant(sys);
      const res = await send(sys.baseUrl, "PATCH", "/v1/api/servers/%E0%A4%A", {
        headers: t.bearer(),
        body: { name: "x" },
      });
      expectProblem(res, 400, "INVALID_SERVER_ID");
    });

    it("an id of any length is the route's id code, not 414", async () => {
      const t = await provisionTenant(sys);
      const long = "a".repeat(300);
      expectProblem(await send(sys.baseUrl, "DELETE", `/v1/api/servers/${long}`), 401, "UNAUTHENTICATED");
      expectProblem(
        await send(sys.baseUrl, "DELETE", `/v1/api/servers/${long}`, { headers: t.bearer() }),
        400,
        "INVALID_SERVER_ID",
      );
    });

    it("a method outside the table is 405 with Allow on a known path and 404 elsewhere, never 500", async () => {
      for (const method of ["QUERY", "TRACE", "PROPFIND", "MKCOL"]) {
        const known = await exchange(
          sys.baseUrl,
          `${method} /v1/api/servers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
        );
        expectRawProblem(known, 405, "METHOD_NOT_ALLOWED");
        expect(known.headers.allow, method).toBe("GET, POST");
        const unknown = await exchange(
          sys.baseUrl,
          `${method} /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
        );
        expectRawProblem(unknown, 404, "NOT_FOUND");
      }
    });

    it("a malformed request line or header is a 400 problem with a request id, not Node's bare 400", async () => {
      expectRawProblem(
        await exchange(sys.baseUrl, "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n"),
        400,
        "INVALID_ARGUMENT",
      );
      expectRawProblem(await exchange(sys.baseUrl, "GARBAGE\r\n\r\n"), 400, "INVALID_ARGUMENT");
      const huge = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`;
      expectRawProblem(await exchange(sys.baseUrl, huge), 400, "INVALID_ARGUMENT");
    });

    it("an empty or unparsable Content-Type is INVALID_BODY only after 404, 405 and 401", async () => {
      const t = await provisionTenant(sys);
      const body = JSON.stringify({ name: "ct" });
      for (const type of ["", ";;", "json", "application/"]) {
        const head = (line: string, extra = "") =>
          `${line} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n${extra}Connection: close\r\n\r\n${body}`;
        expectRawProblem(await exchange(sys.baseUrl, head("POST /nowhere")), 404, "NOT_FOUND");
        expectRawProblem(await exchange(sys.baseUrl, head("PUT /v1/api/servers")), 405, "METHOD_NOT_ALLOWED");
        expectRawProblem(await exchange(sys.baseUrl, head("POST /v1/api/servers")), 401, "UNAUTHENTICATED");
        const authed = head("POST /v1/api/servers", `Authorization: Bearer ${t.key}\r\n`);
        expectRawProblem(await exchange(sys.baseUrl, authed), 400, "INVALID_BODY");
      }
    });

    it("a query value that does not percent-decode is refused by its parameter's rule", async () => {
      const t = await provisionTenant(sys);
      const res = await send(sys.baseUrl, "GET", "/v1/api/replays?page_size=%ZZ", { headers: t.bearer() });
      expectProblem(res, 400, "INVALID_PAGE_SIZE");
    });

    it("an oversized Content-Length with a stalled body is answered 413 at once, and the connection closed", async () => {
      const head = `POST /v1/api/servers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{"name":`;
      const res = await exchange(sys.baseUrl, head);
      expectRawProblem(res, 413, "PAYLOAD_TOO_LARGE");
      expect(res.headers.connection).toBe("close");
      expect(res.firstByteMs).toBeLessThan(1000);
      expect(res.closedAfterMs).toBeLessThan(4000);
    });
  });
}
