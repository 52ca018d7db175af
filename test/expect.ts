import { expect } from "vitest";
import type { Res } from "./http.js";

/**
 * Asserts an RFC 9457 problem (decisions.md §1) with this status and code: problem+json, the
 * type/title/status/code/detail fields, and the request id as `instance`. Returns its body.
 */
export function expectProblem(res: Res, status: number, code: string, context = ""): any {
  const where = `${context} -> ${res.status} ${res.text}`;
  expect({ status: res.status, code: res.body?.code }, where).toEqual({ status, code });
  expect(res.headers.get("content-type") ?? "", where).toMatch(/^application\/problem\+json/);
  expect(res.body, where).toMatchObject({
    type: expect.any(String),
    title: expect.any(String),
    status,
    code,
    detail: expect.any(String),
  });
  expect(res.body.instance, where).toBe(res.headers.get("x-request-id"));
  return res.body;
}
