// A webhook receiver in Node with @replay/client's verifier (clients/typescript/README.md installs it):
//   WEBHOOK_SECRET=whsec_… TLS_CERT=cert.pem TLS_KEY=key.pem node webhook-receiver.mjs
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { verifyWebhook } from "@replay/client";

const secret = process.env.WEBHOOK_SECRET; // the `secret` POST /v1/webhooks answered, once
if (!secret) throw new Error("set WEBHOOK_SECRET");
const tls = { cert: readFileSync(process.env.TLS_CERT), key: readFileSync(process.env.TLS_KEY) };
createServer(tls, (req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    // The raw bytes, before any JSON parsing; a timestamp over 300 s off (a captured request replayed
    // later) or a signature that differs (compared in constant time) is refused.
    const verified = verifyWebhook(Buffer.concat(chunks), req.headers, secret, { toleranceSeconds: 300 });
    if (!verified.ok) return res.writeHead(401).end();
    const { event, event_id } = verified.event; // the same event_id may come twice: act on it once
    console.log(event, event_id);
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 8443));
