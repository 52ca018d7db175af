import * as grpc from "@grpc/grpc-js";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
const { createRpcServer } = await import("/work/main/dist/lib/rpc/server.js");
const { RecorderService, CheckInRequestSchema, CheckInResponseSchema } = await import("/work/main/dist/gen/replay/servers/v1/recorder_pb.js");
if (process.argv[2] === "lean") {
  const s = await createRpcServer({ name: "t", port: 0, routes(r) { r.service(RecorderService, { async checkIn(req) { return { serverId: req.serverId }; } }); } });
  process.send(s.port);
} else {
  const server = new grpc.Server();
  server.addService({ CheckIn: { path: `/${RecorderService.typeName}/CheckIn`, requestStream: false, responseStream: false,
    requestSerialize: (m) => Buffer.from(toBinary(CheckInRequestSchema, m)), requestDeserialize: (b) => fromBinary(CheckInRequestSchema, b),
    responseSerialize: (m) => Buffer.from(toBinary(CheckInResponseSchema, create(CheckInResponseSchema, m))), responseDeserialize: (b) => fromBinary(CheckInResponseSchema, b) } },
    { CheckIn: (call, cb) => cb(null, { serverId: call.request.serverId }) });
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, port) => process.send(port));
}
