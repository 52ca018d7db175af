// Keyset paging as an async iterator: every list of the API answers `next_page_token`, empty exactly
// when no item follows, and takes it back as `page_token`.
import type { Problem } from "./errors.js";

/** A failed page: the problem+json answer, thrown because an iterator has no result to carry it. */
export class ReplayApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
  ) {
    super(problem ? `${status} ${problem.code}: ${problem.detail ?? ""}` : `HTTP ${status}`);
    this.name = "ReplayApiError";
  }
}

type Page<T> = { results: T[]; next_page_token: string };

/** The answer's body as a problem when it is one (a proxy's HTML error page is not). */
function asProblem(body: unknown): Problem | undefined {
  return typeof body === "object" && body !== null && typeof (body as { code?: unknown }).code === "string"
    ? (body as Problem)
    : undefined;
}
type PageAnswer<T> = { data?: Page<T>; error?: unknown; response: Response };

/**
 * Yields every item of a keyset-paged list, fetching each page with the previous page's token, and
 * only when the loop asks for an item past the last page fetched (breaking out fetches no more).
 */
export async function* paged<T>(fetchPage: (pageToken: string | undefined) => Promise<PageAnswer<T>>) {
  let token: string | undefined;
  do {
    const { data, error, response } = await fetchPage(token);
    if (data === undefined) throw new ReplayApiError(response.status, asProblem(error));
    yield* data.results;
    token = data.next_page_token;
    // Empty when no item follows; anything but a token (a malformed page) must not refetch page one.
  } while (typeof token === "string" && token !== "");
}
