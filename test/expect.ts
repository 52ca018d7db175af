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

/**
 * Asserts that the answer about another tenant's resource is the answer about an unknown id
 * (decisions.md §2 "Tenancy"): the same problem, its detail differing only by the id it names.
 */
export function expectLikeUnknown(
  theirs: Res,
  theirId: string,
  unknown: Res,
  unknownId: string,
  status: number,
  code: string,
): void {
  const shape = (res: Res, id: string, context: string) => {
    const { instance: _, detail, ...rest } = expectProblem(res, status, code, context);
    const contentType = res.headers.get("content-type");
    return { ...rest, contentType, detail: String(detail).replaceAll(id.toLowerCase(), "<id>") };
  };
  expect(shape(theirs, theirId, "another tenant's id")).toEqual(shape(unknown, unknownId, "an unknown id"));
}
