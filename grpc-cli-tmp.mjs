import { fork } from "node:child_process"; import fs from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
const { RecorderService, CheckInRequestSchema, CheckInResponseSchema } = await import("/work/main/dist/gen/replay/servers/v1/recorder_pb.js");
const cpu = (pid) => { const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return (Number(f[11]) + Number(f[12])) * 10000; };
async function measure(kind) {
  const child = fork("./grpc-srv-tmp.mjs", [kind], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const port = await new Promise((r) => child.once("message", r));
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const call = () => new Promise((res, rej) => client.makeUnaryRequest(`/${RecorderService.typeName}/CheckIn`, (m) => Buffer.from(toBinary(CheckInRequestSchema, m)), (b) => fromBinary(CheckInResponseSchema, b), create(CheckInRequestSchema, { serverId: "abc" }), new grpc.Metadata(), { deadline: Date.now() + 10000 }, (e, r) => e ? rej(e) : res(r)));
  const run = (n) => Promise.all(Array.from({ length: 64 }, async () => { for (let i = 0; i < n; i++) await call(); }));
  await run(50);
  const c0 = cpu(child.pid); const t0 = Date.now(); await run(200);
  const calls = 64 * 200;
  console.log(kind.padEnd(8), "server µs/call", ((cpu(child.pid) - c0) / calls).toFixed(0), "calls/s", Math.round(calls / ((Date.now() - t0) / 1000)));
  client.close(); child.kill();
}
for (let k = 0; k < 3; k++) { await measure("lean"); await measure("grpc-js"); }
