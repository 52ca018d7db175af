import { DomainError } from "../errors.js";
import { isUuid } from "../ids.js";

/**
 * For the internal port's operator lists, whose rows are never deleted: the token is the previous page's last
 * id, unsigned because the list is scoped by the caller. Anything but a UUID is INVALID_PAGE_TOKEN.
 */
export function keysetAfter(pageToken: string): string | null {
  if (pageToken === "") return null;
  if (!isUuid(pageToken)) throw invalidToken();
  return pageToken.toLowerCase();
}

/**
 * Rows read with `limit = pageSize + 1`. A token that yields no row named none of this list (tokens are issued
 * only when a row followed), so it is INVALID_PAGE_TOKEN, not an empty page.
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
