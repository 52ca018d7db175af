// The webhooks benchmark's receiver: an HTTPS server (HTTP/1.1, keep-alive) on loopback with the
// certificate in CERT_DIR, answering every POST 200 at once. It notes each request's path, event id
// and arrival time; GET /stats returns them (and resets with ?reset=1), GET /count how many distinct
// (path, event id) pairs arrived, the harness's poll: cheap at any size, where a poll of the whole
// list (megabytes of JSON by the end of a phase) four times a second cost the receiver and the
// harness CPU that grew with the phase's length, so the slower target paid more of it (the system's
// phase; docs/performance.md has the figures). POST /down closes the
// listener and every connection for the milliseconds its body gives, then listens
// again on the same port: the receiver "down for 30 s" of the drain measurement.
// Env: CERT_DIR, TLS_PORT (the receiver's), PORT (the control channel's, 0 = any). Prints
// {"port":N} (the control port) once listening; SIGTERM stops it.
import { readFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";

const { CERT_DIR: certDir, TLS_PORT: tlsPort, PORT: port = "0" } = process.env;
if (!certDir || !tlsPort) throw new Error("webhook-receiver-server needs CERT_DIR and TLS_PORT");

let received: [path: string, eventId: string, atMs: number][] = [];
let distinct = new Set<string>();
const server = createServer(
  { cert: readFileSync(join(certDir, "cert.pem")), key: readFileSync(join(certDir, "key.pem")) },
  (req, res) => {
    req.resume();
    req.on("end", () => {
      const path = req.url ?? "";
      const eventId = String(req.headers["x-fv-event-id"]);
      received.push([path, eventId, Date.now()]);
      distinct.add(`${path} ${eventId}`);
      res.writeHead(200, { "content-type": "application/json", "content-length": "2" });
      res.end("{}");
    });
  },
);
server.keepAliveTimeout = 60_000;

// The harness's control channel, plain HTTP on another port: stats and taking the receiver down.
const control = createHttpServer((req, res) => {
  if (req.url === "/count") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ distinct: distinct.size }));
    return;
  }
  if (req.url?.startsWith("/stats")) {
    const body = JSON.stringify(received);
    if (req.url.includes("reset=1")) {
      received = [];
      distinct = new Set();
    }
    res.writeHead(200, { "content-type": "application/json" }).end(body);
    return;
  }
  if (req.url === "/down" && req.method === "POST") {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const downMs = Number(Buffer.concat(chunks).toString());
      server.close();
      server.closeAllConnections();
      setTimeout(() => server.listen(Number(tlsPort), "127.0.0.1"), downMs);
      res.writeHead(204).end();
    });
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
});
