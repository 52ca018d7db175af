// `npm run docs:grpc-status`: rewrites the code -> gRPC status table of docs/grpc-clients.md from the
// one error table (lib/errors.ts). test/grpc-clients-doc.test.ts fails while the committed copy differs.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { withGrpcStatusTable } from "./grpc-status-table.js";

const target = fileURLToPath(new URL("../../docs/grpc-clients.md", import.meta.url));
writeFileSync(target, withGrpcStatusTable(readFileSync(target, "utf8")));
console.log(`wrote ${target}`);
