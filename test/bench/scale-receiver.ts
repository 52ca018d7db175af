// The scale benchmark's webhook receiver, in a process of its own so that its clock reads are not
// delayed by the harness: an HTTPS server (HTTP/1.1, keep-alive) on loopback with the certificate
// in CERT_DIR. A path starting with /flaky answers 500 to the first request of each event and 200
// to the later ones (the retry path); every other path answers 200 at once. Each request is noted
// by the replay its body names (data.collection.replay_id) with its path, event id, status and
// arrival time (ms since the epoch, Date.now(): the harness's clock, scale-measure.ts nowMs).
// Control channel, plain HTTP: GET /wait?replay=R&n=N answers once N requests naming R have
// arrived (or after 60 s with those there are), as JSON
// [{ path, eventId, status, atMs }]; GET /count answers how many requests arrived in all.
// Env: CERT_DIR, TLS_PORT (the receiver's), PORT (the control channel's, 0 = any). Prints
// {"port":N} (the control port) once listening; SIGTERM stops it.
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

const { CERT_DIR: certDir, TLS_PORT: tlsPort, PORT: port = "0" } = process.env;
if (!certDir || !tlsPort) throw new Error("scale-receiver needs CERT_DIR and TLS_PORT");

const WAIT_MAX_MS = 60_000;
const now = () => Date.now();

type Arrival = { path: string; eventId: string; status: number; atMs: number };
const byReplay = new Map<string, Arrival[]>();
const seenEvents = new Set<string>();
const waiters = new Map<string, { n: number; res: ServerResponse; timer: NodeJS.Timeout }[]>();
let count = 0;

function answer(replay: string): void {
  const list = waiters.get(replay);
  if (!list) return;
  const got = byReplay.get(replay) ?? [];
  for (const w of list.filter((w) => got.length >= w.n)) {
    clearTimeout(w.timer);
    w.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(got));
  }
  const rest = list.filter((w) => got.length < w.n);
  if (rest.length > 0) waiters.set(replay, rest);
  else waiters.delete(replay);
}

const server = createServer(
  { cert: readFileSync(join(certDir, "cert.pem")), key: readFileSync(join(certDir, "key.pem")) },
  (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const atMs = now();
      const path = req.url ?? "";
      const eventId = String(req.headers["x-fv-event-id"]);
      let replay = "";
      try {
        replay = String(JSON.parse(Buffer.concat(chunks).toString()).data?.collection?.replay_id ?? "");
      } catch {
        // not a delivery body: noted under ""
      }
      const key = `${path} ${eventId}`;
      const status = path.startsWith("/flaky") && !seenEvents.has(key) ? 500 : 200;
      seenEvents.add(key);
      count++;
      const list = byReplay.get(replay) ?? [];
      list.push({ path, eventId, status, atMs });
      byReplay.set(replay, list);
      res.writeHead(status, { "content-type": "application/json", "content-length": "2" });
      res.end("{}");
      answer(replay);
    });
  },
);
server.keepAliveTimeout = 60_000;

const control = createHttpServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://control");
  if (url.pathname === "/count") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ count }));
    return;
  }
  if (url.pathname === "/wait") {
    const replay = url.searchParams.get("replay") ?? "";
    const n = Number(url.searchParams.get("n") ?? "1");
    const list = waiters.get(replay) ?? [];
    const timer = setTimeout(() => {
      waiters.set(
        replay,
        (waiters.get(replay) ?? []).filter((w) => w.res !== res),
      );
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(byReplay.get(replay) ?? []));
    }, WAIT_MAX_MS);
    list.push({ n, res, timer });
    waiters.set(replay, list);
    answer(replay);
    return;
  }
  res.writeHead(404).end();
});

server.listen(Number(tlsPort), "127.0.0.1", () => {
  control.listen(Number(port), "127.0.0.1", () => {
    process.stdout.write(`{"port":${(control.address() as AddressInfo).port}}\n`);
  });
});
process.on("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  control.close();
  control.closeAllConnections();
});
