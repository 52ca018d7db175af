// A signed GET /v1/replays from plain JavaScript (Node 20, no TypeScript), for a request you send
// yourself: @replay/client's signRequest (createReplayClient signs its own requests). From the
// repository after `npm ci`, or from a project that installed the package:
//   TENANT_ID=… KID=… SECRET=… [REPLAY_URL=http://127.0.0.1:8080] node examples/sign-request.mjs
import { signRequest } from "@replay/client";

const { TENANT_ID, KID, SECRET, REPLAY_URL = "http://127.0.0.1:8080" } = process.env;
if (!TENANT_ID || !KID || !SECRET) throw new Error("set TENANT_ID, KID and SECRET (npm start prints a dev tenant's)");

const url = `${REPLAY_URL}/v1/replays?page_size=5`;
const body = undefined; // the exact bytes you send, when there is a body
const { authorization } = signRequest({ tenant: TENANT_ID, kid: KID, secret: SECRET, method: "GET", url, body });
const res = await fetch(url, { method: "GET", headers: { authorization }, body });
console.log(res.status, await res.text());
if (!res.ok) process.exitCode = 1;
