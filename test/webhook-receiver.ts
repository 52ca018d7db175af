import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingHttpHeaders } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { pollUntil } from "./poll.js";

/** Writes a self-signed certificate for 127.0.0.1 and localhost (`cert.pem`, `key.pem`) into `dir`. */
export function writeReceiverCertificate(dir: string): void {
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"],
      ...["-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-subj", "/CN=localhost"],
      ...["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
    ],
    { stdio: "ignore" },
  );
}

export type ReceivedRequest = {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  json: unknown;
  /** When the request's body had arrived (Date.now()). */
  at: number;
  /** Whether its connection has closed (the sender cut it, or the receiver's answer ended it). */
  closed: boolean;
};

/**
 * How the receiver answers one path: a status after an optional delay; `hang` never answers, and
 * with `closeAfterMs` closes the connection after that long instead (a receiver that stalls).
 */
export type Behaviour = {
  status?: number;
  delayMs?: number;
  headers?: Record<string, string>;
  hang?: boolean;
  closeAfterMs?: number;
};

export type WebhookReceiver = {
  port: number;
  /** A fresh path, so that each test sees only its own deliveries. */
  newPath(): string;
  url(path: string): string;
  behave(path: string, behaviour: Behaviour | ((index: number) => Behaviour)): void;
  requests(path: string): ReceivedRequest[];
  waitForRequests(path: string, count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
};

/**
 * An HTTPS webhook receiver on 127.0.0.1 with the certificate in `certDir`: it records every request
 * with its raw body and answers each path as told (200 by default).
 */
export async function startWebhookReceiver(options: { port?: number; certDir: string }): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  const behaviours = new Map<string, Behaviour | ((index: number) => Behaviour)>();
  const timers = new Set<NodeJS.Timeout>();
  const byConnection = new WeakMap<object, ReceivedRequest[]>();
  const server = createServer(
    {
      cert: readFileSync(join(options.certDir, "cert.pem")),
      key: readFileSync(join(options.certDir, "key.pem")),
    },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        const raw = Buffer.concat(chunks);
        const path = (req.url ?? "/").split("?")[0] ?? "/";
        let json: unknown;
        try {
          json = JSON.parse(raw.toString("utf8"));
        } catch {
          json = undefined;
        }
        const index = requests.filter((r) => r.path === path).length;
        const received: ReceivedRequest = { path, headers: req.headers, raw, json, at: Date.now(), closed: false };
        // One close listener per connection, not per request: a kept-alive connection carries many.
        let onConnection = byConnection.get(req.socket);
        if (!onConnection) {
          const list: ReceivedRequest[] = [];
          onConnection = list;
          byConnection.set(req.socket, list);
          req.socket.once("close", () => {
            for (const r of list) r.closed = true;
          });
        }
        onConnection.push(received);
        requests.push(received);
        const configured = behaviours.get(path) ?? {};
        const b = typeof configured === "function" ? configured(index) : configured;
        if (b.hang) {
          if (b.closeAfterMs === undefined) return;
          const timer = setTimeout(() => {
            timers.delete(timer);
            req.socket.destroy();
          }, b.closeAfterMs);
          timers.add(timer);
          return;
        }
        const answer = () => {
          res.writeHead(b.status ?? 200, { "content-type": "application/json", ...b.headers });
          res.end("{}");
        };
        if (!b.delayMs) return answer();
        const timer = setTimeout(() => {
          timers.delete(timer);
          answer();
        }, b.delayMs);
        timers.add(timer);
      });
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", resolve);
  });
  const port = (server.address() as AddressInfo).port;
  const receiver: WebhookReceiver = {
    port,
    newPath: () => `/hook/${randomUUID()}`,
    url: (path) => `https://127.0.0.1:${port}${path}`,
    behave(path, behaviour) {
      behaviours.set(path, behaviour);
    },
    requests: (path) => requests.filter((r) => r.path === path),
    async waitForRequests(path, count, timeoutMs = 15_000) {
      return pollUntil(
        async () => receiver.requests(path),
        (got) => got.length >= count,
        timeoutMs,
      );
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
