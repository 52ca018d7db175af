import { type ErrorCode, errorCodes, type FieldViolation } from "./errors.js";

/** An RFC 9457 problem as decisions.md §1 shapes it. */
export type Problem = {
  type: string;
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
  instance?: string;
  errors?: { field: string; code: string; detail: string }[];
};

const titles: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  501: "Not Implemented",
  503: "Service Unavailable",
};

/** The gateway answers with it and replayctl prints it, so an operator and a client see the same shape. */
export function problem(code: ErrorCode, detail: string, violations: readonly FieldViolation[] = []): Problem {
  const status = errorCodes[code].status;
  const body: Problem = { type: "about:blank", title: titles[status] ?? "Error", status, code, detail };
  if (violations.length > 0) body.errors = violations.map((v) => ({ field: v.field, code: v.code, detail: v.detail }));
  return body;
}
