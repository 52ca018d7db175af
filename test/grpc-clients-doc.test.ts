// docs/grpc-clients.md holds two tables that come from code: contract code -> gRPC status (from the
// one error table, lib/errors.ts) and the embedded services' ports (lib/config.ts). Each fails here
// when the doc drifts from the code.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { defaultServicePorts, serviceNames, servicePortVariable } from "../lib/config.js";
import { errorCodes } from "../lib/errors.js";
import { grpcStatusName, withGrpcStatusTable } from "../lib/grpc-status-table.js";

const root = fileURLToPath(new URL("..", import.meta.url)).replace(/\/dist\/?$/, "/");
const doc = readFileSync(join(root, "docs", "grpc-clients.md"), "utf8");

describe("docs/grpc-clients.md", () => {
  it("has the code -> gRPC status table the error table gives (npm run docs:grpc-status rewrites it)", () => {
    expect(doc, "the table differs from lib/errors.ts: run npm run docs:grpc-status").toBe(withGrpcStatusTable(doc));
    // As the issue found it: RECORDING_IN_PROGRESS travels as FAILED_PRECONDITION (9).
    expect(doc).toMatch(
      /^\| `RECORDING_IN_PROGRESS` +\| 9 `FAILED_PRECONDITION` +\| `failed_precondition` +\| 409 +\|$/m,
    );
    // gRPC's canonical names, including the two-word ones.
    expect(grpcStatusName(errorCodes.RATE_LIMITED.rpc)).toBe("RESOURCE_EXHAUSTED");
    expect(grpcStatusName(Code.DeadlineExceeded)).toBe("DEADLINE_EXCEEDED");
  });

  it("names each embedded service's port variable with its default", () => {
    for (const service of serviceNames) {
      const row = new RegExp(`^\\| ${defaultServicePorts[service]} +\\| \`${servicePortVariable(service)}\` +\\|`, "m");
      expect(doc).toMatch(row);
    }
  });
});
