// A webhook receiver in plain Node: WEBHOOK_SECRET=whsec_… TLS_CERT=cert.pem TLS_KEY=key.pem node webhook-receiver.mjs
import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";

const tls = { cert: readFileSync(process.env.TLS_CERT), key: readFileSync(process.env.TLS_KEY) };
createServer(tls, (req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const raw = Buffer.concat(chunks); // sign-check the raw bytes, before any JSON parsing
    const ts = String(req.headers["x-fv-timestamp"]);
    const mac = createHmac("sha256", process.env.WEBHOOK_SECRET).update(`${ts}.`).update(raw).digest("hex");
    const [expected, given] = [Buffer.from(`sha256=${mac}`), Buffer.from(String(req.headers["x-fv-signature"]))];
    const fresh = Math.abs(Date.now() / 1000 - Number(ts)) < 300; // refuse a captured request replayed later
    if (!fresh || given.length !== expected.length || !timingSafeEqual(given, expected))
      return res.writeHead(401).end();
    const event = JSON.parse(raw); // the same event_id may come twice: act on it once
    console.log(event.event, event.event_id);
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 8443));
