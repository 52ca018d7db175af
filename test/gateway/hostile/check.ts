import { rawRequest } from "../../http.js";
import type { HostileRequest } from "./request.js";

export type Answer = Awaited<ReturnType<typeof rawRequest>>;

const ANSWER_TIMEOUT_MS = 15_000;
const VISIBLE_ASCII = /^[\x21-\x7e]{1,128}$/;

/** Sends `req` on a fresh connection; a request that gets no answer in time is a failure too. */
export async function sendHostile(baseUrl: string, req: HostileRequest): Promise<Answer | Error> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Error>((resolve) => {
    timer = setTimeout(() => resolve(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)), ANSWER_TIMEOUT_MS);
  });
  try {
    return await Promise.race([
      rawRequest(baseUrl, `${req.method} ${req.target}`, req.headerLines, {
        body: req.body,
        chunked: req.chunked,
      }).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err)))),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What is wrong with an answer, by decisions.md §1: never a 5xx (but a 501 NOT_IMPLEMENTED from a
 * route whose service is not built yet), every error a problem+json whose `instance` is the
 * request id, and an X-Request-Id on every answer; and by §2, no success without a valid
 * credential. Empty when nothing is.
 */
export function contractViolations(req: HostileRequest, answer: Answer | Error): string[] {
  if (answer instanceof Error) return [`no HTTP answer: ${answer.message}`];
  const wrong: string[] = [];
  if (!Number.isInteger(answer.status)) return ["no parsable status line"];
  let body: { code?: unknown; status?: unknown; instance?: unknown } | undefined;
  try {
    body = answer.body === "" ? undefined : JSON.parse(answer.body);
  } catch {
    body = undefined;
  }
  if (answer.status >= 500 && !(answer.status === 501 && body?.code === "NOT_IMPLEMENTED")) {
    wrong.push(`a ${answer.status} answer`);
  }
  if (req.forged && answer.status >= 200 && answer.status < 300)
    wrong.push("a request without a valid credential succeeded");
  if (answer.requestId === undefined || !VISIBLE_ASCII.test(answer.requestId)) {
    wrong.push(`X-Request-Id missing or malformed: ${JSON.stringify(answer.requestId)}`);
  }
  if (answer.status >= 400) {
    if (!answer.contentType.startsWith("application/problem+json")) {
      wrong.push(`content type ${JSON.stringify(answer.contentType)} instead of application/problem+json`);
    }
    // A HEAD answer has no body to check.
    if (req.method !== "HEAD") {
      if (typeof body?.code !== "string" || body.status !== answer.status) wrong.push("the body is not a problem");
      else if (body.instance !== answer.requestId) wrong.push("the problem's instance is not the X-Request-Id");
    }
  }
  return wrong;
}

/** The request and its answer as one JSON line, enough to replay it by hand (body as UTF-8, or base64). */
export function describeFailure(req: HostileRequest, answer: Answer | Error, wrong: string[]): string {
  const body = req.body === undefined ? undefined : bodyText(req.body);
  const got =
    answer instanceof Error
      ? answer.message
      : {
          status: answer.status,
          contentType: answer.contentType,
          requestId: answer.requestId,
          body: answer.body.slice(0, 500),
        };
  return JSON.stringify({ wrong, request: { ...req, body }, answer: got });
}

function bodyText(body: Buffer): string | { base64: string } {
  const text = body.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(body)) return { base64: body.toString("base64") };
  return text.length > 300 ? `${text.slice(0, 300)}… (${body.length} bytes)` : text;
}
