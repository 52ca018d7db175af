/**
 * Names for a pool's parameterised statements, so that pg prepares each statement once per
 * connection and later runs only bind and execute. An unnamed statement is parsed, analysed and
 * planned on every call: for the servers list (20 rows with a replay count each) that was half of
 * Postgres's CPU per call, and a prepared one soon runs a cached generic plan, which Postgres
 * chooses only when it costs no more than the custom plans it made for the first five calls.
 * Past `max` distinct texts, statements go unnamed, so a caller that builds SQL text per call
 * cannot grow every connection's statement cache without bound.
 */
export type StatementNames = {
  /** The name to prepare `text` under, or undefined to run it unnamed. */
  nameOf(text: string): string | undefined;
  /** Gives `text` a new name from now on, so that every connection prepares it afresh. */
  forget(text: string): void;
};

/**
 * Leads the text of a statement planned on every call (sent unnamed, never prepared): one whose
 * best plan depends on its parameters, such as a list with optional filters over tenants of every
 * size. Prepared, Postgres settles after five calls on a generic plan when it looks no dearer than
 * the custom ones were; for the replays list at 200 000 replays of one tenant that plan read and
 * sorted the tenant's whole list, 2.3 s for a first page the custom plan reads in 11 ms, on every
 * connection whose first calls came from smaller tenants (npm run bench scale).
 */
export const PLANNED_PER_CALL = "/* planned per call */";

export function createStatementNames(max = 1000): StatementNames {
  const names = new Map<string, string>();
  let issued = 0;
  return {
    nameOf(text) {
      if (text.startsWith(PLANNED_PER_CALL)) return undefined;
      let name = names.get(text);
      if (name === undefined && names.size < max) {
        name = `s${++issued}`;
        names.set(text, name);
      }
      return name;
    },
    forget(text) {
      names.delete(text);
    },
  };
}

/**
 * Postgres refuses to run a prepared statement whose result columns changed since it was prepared
 * (a `t.*` of a table a migration added a column to, while this process kept running). The same
 * text prepared again under a new name answers with the new columns.
 */
export function isStalePreparedStatement(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === "0A000" && typeof message === "string" && message.includes("cached plan must not change result type");
}
