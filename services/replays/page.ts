import { DomainError } from "../../lib/errors.js";

export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;

/** decisions.md §5: page_size from 1 to 100, default 20. */
export function parsePageSize(pageSize: number | undefined): number {
  if (pageSize === undefined) return PAGE_SIZE_DEFAULT;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > PAGE_SIZE_MAX) {
    throw new DomainError("INVALID_PAGE_SIZE", "page_size must be a whole number from 1 to 100");
  }
  return pageSize;
}
