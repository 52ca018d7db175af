import { DomainError } from "../errors.js";
import { isUuid } from "../ids.js";

/**
 * Where a keyset page starts: after the row whose id the page token names, or at the beginning
 * for an empty token. These tokens are for the operator lists on the internal port, whose rows
 * are never deleted and are ordered by (created_at, id): the token is the last id of the previous
 * page, which needs no signing because the list it is used with is already scoped by the caller.
 * Anything that is not a UUID is INVALID_PAGE_TOKEN.
 */
export function keysetAfter(pageToken: string): string | null {
  if (pageToken === "") return null;
  if (!isUuid(pageToken)) throw invalidToken();
  return pageToken.toLowerCase();
}

/**
 * Cuts the rows a store read with `limit = pageSize + 1` into one page and the token of the next
 * (empty on the last page). A token that yields no row at all named no row of this list (a token
 * is only issued when a row followed it), so it is INVALID_PAGE_TOKEN rather than an empty page.
 */
export function keysetPage<R>(
  rows: readonly R[],
  pageSize: number,
  after: string | null,
  idOf: (row: R) => string,
): { rows: R[]; nextPageToken: string } {
  if (after !== null && rows.length === 0) throw invalidToken();
  const page = rows.slice(0, pageSize);
  const last = page.at(-1);
  return { rows: page, nextPageToken: rows.length > pageSize && last !== undefined ? idOf(last) : "" };
}

function invalidToken(): DomainError {
  return new DomainError("INVALID_PAGE_TOKEN", "page_token is not a next_page_token of this list");
}
