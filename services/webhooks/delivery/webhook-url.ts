import type { FieldViolation } from "../../../lib/errors.js";
import { codePointLength } from "../../../lib/text.js";
import { type AllowTargets, describeBlocked, firstBlocked, type Resolver, resolveHost, targetKey } from "./target.js";

export const WEBHOOK_URL_LENGTH_MAX = 2048;

export type WebhookUrlDeps = { resolve: Resolver; allowTargets: AllowTargets };

/**
 * The 422 `url` violation by decisions.md §6, or undefined. Hosts are judged as the WHATWG parser reads them
 * (`https://0x7f.1/` is loopback); a name that does not resolve now is accepted, as every attempt vets it again.
 */
export async function vetWebhookUrl(text: string, deps: WebhookUrlDeps): Promise<FieldViolation | undefined> {
  // Code points (decisions.md §1): text over twice the limit in UTF-16 units is refused before it is walked.
  if (text.length > 2 * WEBHOOK_URL_LENGTH_MAX || codePointLength(text) > WEBHOOK_URL_LENGTH_MAX)
    return violation(`url must be at most ${WEBHOOK_URL_LENGTH_MAX} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return violation("url must be an absolute https URL");
  }
  if (url.protocol !== "https:") return violation("url must use https");
  if (url.username !== "" || url.password !== "" || hasEmptyUserInfo(text))
    return violation("url must not contain user-info");
  if (deps.allowTargets.has(targetKey(url.hostname, url.port))) return undefined;
  let addresses: string[];
  try {
    addresses = await resolveHost(url.hostname, deps.resolve);
  } catch {
    return undefined;
  }
  const blocked = firstBlocked(addresses);
  return blocked && violation(`url host ${describeBlocked(blocked.address, blocked.reason)}`);
}

/** `https://@host/`: empty user-info the WHATWG parser drops; the authority is found as the parser finds it. */
function hasEmptyUserInfo(text: string): boolean {
  const cleaned = text.replace(/[\t\n\r]/g, "");
  let start = 0;
  while (start < cleaned.length && cleaned.charCodeAt(start) <= 0x20) start++;
  const authority = /^https:[/\\]*([^/\\?#]*)/i.exec(cleaned.slice(start))?.[1] ?? "";
  return authority.includes("@");
}

function violation(detail: string): FieldViolation {
  return { field: "url", code: "VALIDATION_ERROR", detail };
}
