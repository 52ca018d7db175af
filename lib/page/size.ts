import { DomainError } from "../errors.js";

export const PAGE_SIZE_DEFAULT = 20;
export const PAGE_SIZE_MAX = 100;

const invalid = () =>
  new DomainError("INVALID_PAGE_SIZE", `page_size must be a whole number from 1 to ${PAGE_SIZE_MAX}`);

/** decisions.md §5: unset is 20, else 1 to 100. */
export function pageSizeOf(value: number | undefined): number {
  if (value === undefined) return PAGE_SIZE_DEFAULT;
  if (!Number.isInteger(value) || value < 1 || value > PAGE_SIZE_MAX) throw invalid();
  return value;
}

/** decisions.md §5: given at most once, as 1 to 3 ASCII digits (no sign, space or exponent), 1 to 100. */
export function parsePageSize(values: readonly string[] | undefined): number {
  if (values === undefined) return PAGE_SIZE_DEFAULT;
  const [text] = values;
  if (values.length !== 1 || text === undefined || !/^\d{1,3}$/.test(text)) throw invalid();
  return pageSizeOf(Number(text));
}
