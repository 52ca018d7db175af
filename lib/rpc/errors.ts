import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/replay/common/v1/common_pb.js";
import { isConnectionLoss } from "../db/errors.js";
import { DomainError, type ErrorCode, errorCodes, type FieldViolation, isErrorCode } from "../errors.js";
import { logger } from "../log.js";
import { traceLogFields } from "../trace.js";
import { kRequestId, kTenant, kTrace } from "./context.js";

const log = logger("lib:rpc:errors");

/** The contract code travels as an ErrorDetail. */
export function toConnectError(err: DomainError): ConnectError {
  return new ConnectError(
    err.detail,
    errorCodes[err.code].rpc,
    undefined,
    [{ desc: ErrorDetailSchema, value: { code: err.code, violations: [...err.violations] } }],
    err,
  );
}

/** The services' one error mapping (STYLE.md §7). A fault is answered as a bare Internal: no SQL or stack leaks. */
export const errorInterceptor: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    if (err instanceof DomainError) throw toConnectError(err);
    if (err instanceof ConnectError) throw err;
    const fields = {
      procedure: req.method.name,
      requestId: req.contextValues.get(kRequestId),
      tenantId: req.contextValues.get(kTenant),
      ...traceLogFields(req.contextValues.get(kTrace)),
    };
    // The caller went away mid-call: nothing failed here, and nobody reads the answer.
    if (req.signal.aborted) {
      log.info({ ...fields, reason: String(err) }, "the caller went away mid-call");
      throw new ConnectError("the call was cancelled", Code.Canceled);
    }
    // The work rolled back with its connection, so the caller may retry.
    if (isConnectionLoss(err)) {
      log.warn({ ...fields, err: String(err) }, "rpc handler lost its database connection");
      throw toConnectError(new DomainError("SERVICE_UNAVAILABLE", "the service's database is unavailable; retry"));
    }
    log.error({ err, ...fields }, "rpc handler failed");
    throw new ConnectError("internal error", Code.Internal);
  }
};

export function contractCodeOf(err: ConnectError): { code: ErrorCode; violations: FieldViolation[] } | undefined {
  const [detail] = err.findDetails(ErrorDetailSchema);
  if (!detail || !isErrorCode(detail.code)) return undefined;
  const violations = detail.violations.flatMap((v) =>
    isErrorCode(v.code) ? [{ field: v.field, code: v.code, detail: v.detail }] : [],
  );
  return { code: detail.code, violations };
}
