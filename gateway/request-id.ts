import { randomUUID } from "node:crypto";

/** decisions.md §1: the client's X-Request-Id when it is 1 to 128 visible ASCII characters, else a fresh one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  return value !== undefined && /^[\x21-\x7e]{1,128}$/.test(value) ? value : randomUUID();
}

/**
 * Headers a client might send hoping to set the tenant or the actor: they are dropped on arrival,
 * so no later code can read them by mistake (decisions.md §2).
 */
export function isContextOverrideHeader(name: string): boolean {
  return /^x-(actor|tenant|replay-|member|forwarded-tenant)/i.test(name);
}
