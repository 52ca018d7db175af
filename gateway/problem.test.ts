import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../gen/replay/common/v1/common_pb.js";
import { DomainError, errorCodes } from "../lib/errors.js";
import { problem } from "../lib/problem.js";
import { toConnectError } from "../lib/rpc/errors.js";
import { toProblem } from "./problem.js";

const detail = (code: string) => [{ desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { code }) }];

describe("toProblem", () => {
  it("renders a DomainError with the status of its code and its field violations", () => {
    const body = toProblem(
      new DomainError("VALIDATION_ERROR", "bad url", [
        { field: "url", code: "VALIDATION_ERROR", detail: "must be https" },
      ]),
    );
    expect(body).toEqual({
      type: "about:blank",
      title: "Unprocessable Content",
      status: 422,
      code: "VALIDATION_ERROR",
      detail: "bad url",
      errors: [{ field: "url", code: "VALIDATION_ERROR", detail: "must be https" }],
    });
  });

  it("takes the contract code of a service's ConnectError from its ErrorDetail, round-tripping the services' mapping", () => {
    const err = toConnectError(new DomainError("SERVER_LIMIT_REACHED", "plan full"));
    expect(toProblem(err)).toMatchObject({ status: 409, code: "SERVER_LIMIT_REACHED", detail: "plan full" });
  });

  it("never echoes the message of a 5xx", () => {
    const err = new ConnectError(
      "relation servers.server does not exist",
      Code.Internal,
      undefined,
      detail("INTERNAL_ERROR"),
    );
    expect(toProblem(err).detail).not.toContain("relation");
    expect(toProblem(new Error("SELECT secret FROM x")).detail).not.toContain("SELECT");
    expect(toProblem(new Error("boom"))).toMatchObject({ status: 500, code: "INTERNAL_ERROR" });
  });

  it.each([
    [Code.Unavailable, 503, "SERVICE_UNAVAILABLE"],
    [Code.DeadlineExceeded, 503, "SERVICE_UNAVAILABLE"],
    [Code.Unimplemented, 501, "NOT_IMPLEMENTED"],
    [Code.Internal, 500, "INTERNAL_ERROR"],
    [Code.InvalidArgument, 500, "INTERNAL_ERROR"],
  ])("maps a ConnectError %s without a contract code to %s %s", (code, status, contract) => {
    expect(toProblem(new ConnectError("x", code))).toMatchObject({ status, code: contract });
  });

  it("maps Fastify's body limit to 413 PAYLOAD_TOO_LARGE", () => {
    expect(toProblem(Object.assign(new Error("too large"), { code: "FST_ERR_CTP_BODY_TOO_LARGE" }))).toMatchObject({
      status: 413,
      code: "PAYLOAD_TOO_LARGE",
    });
  });

  it("maps a client that went away mid-upload to INVALID_BODY, not a logged 500", () => {
    for (const code of ["ECONNRESET", "ECONNABORTED", "ERR_STREAM_PREMATURE_CLOSE"]) {
      expect(toProblem(Object.assign(new Error("aborted"), { code }))).toMatchObject({
        status: 400,
        code: "INVALID_BODY",
      });
    }
  });

  it("gives every code of the table a title and the table's status", () => {
    for (const [code, { status }] of Object.entries(errorCodes)) {
      const body = problem(code as keyof typeof errorCodes, "x");
      expect(body.status).toBe(status);
      expect(body.title).not.toBe("Error");
    }
  });
});
