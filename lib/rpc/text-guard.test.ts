import { create } from "@bufbuild/protobuf";
import { StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { HealthListResponseSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { ErrorDetailSchema } from "../../gen/replay/common/v1/common_pb.js";
import { CheckInRequestSchema, RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServerStatus } from "../../gen/replay/servers/v1/servers_pb.js";
import { contractCodeOf, errorInterceptor } from "./errors.js";
import { nulPath, textGuard } from "./text-guard.js";

describe("nulPath: where a message holds U+0000", () => {
  it("finds it in a field, a list element, a nested message, a map key and a map value", () => {
    expect(nulPath(CheckInRequestSchema, create(CheckInRequestSchema, { pluginVersion: "1.0\u0000" }))).toBe(
      "plugin_version",
    );
    const detail = create(ErrorDetailSchema, { code: "X", violations: [{ field: "ok" }, { detail: "\u0000" }] });
    expect(nulPath(ErrorDetailSchema, detail)).toBe("violations[1].detail");
    const statuses = create(HealthListResponseSchema, { statuses: { "a\u0000b": {} } });
    expect(nulPath(HealthListResponseSchema, statuses)).toBe('statuses["a\\u0000b"]');
    const struct = create(StructSchema, {
      fields: { fine: create(ValueSchema, { kind: { case: "stringValue", value: "x\u0000" } }) },
    });
    expect(nulPath(StructSchema, struct)).toBe('fields["fine"].string_value');
  });

  it("passes text without it, control characters and U+FEFF included", () => {
    const req = create(CheckInRequestSchema, { serverId: "\u0001\u001f\u007f\ufeff", pluginVersion: "é😀" });
    expect(nulPath(CheckInRequestSchema, req)).toBeUndefined();
  });
});

describe("textGuard behind the error interceptor", () => {
  let handled = 0;
  const transport = createRouterTransport(
    ({ service }) => {
      service(RecorderService, {
        checkIn(req) {
          handled++;
          return { serverId: req.serverId, status: ServerStatus.ONLINE };
        },
      });
    },
    { router: { interceptors: [errorInterceptor, textGuard] } },
  );
  const client = createClient(RecorderService, transport);

  it("refuses a NUL as INVALID_ARGUMENT naming the field, before the handler runs", async () => {
    const before = handled;
    const err = await client.checkIn({ serverId: "s", pluginVersion: "1\u00002" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect(contractCodeOf(err as ConnectError)).toEqual({
      code: "INVALID_ARGUMENT",
      violations: [
        { field: "plugin_version", code: "INVALID_ARGUMENT", detail: "plugin_version must not contain U+0000" },
      ],
    });
    expect(handled).toBe(before);
  });

  it("lets everything else through", async () => {
    expect((await client.checkIn({ serverId: "s\u0007", pluginVersion: "1.0" })).serverId).toBe("s\u0007");
  });
});
