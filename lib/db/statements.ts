/**
 * Named, so pg prepares each statement once per connection instead of planning it on every call. Past
 * `max` distinct texts they go unnamed, so SQL built per call cannot grow every connection's cache unbounded.
 */
export type StatementNames = {
  nameOf(text: string): string | undefined;
  /** A new name from now on, so every connection prepares it afresh. */
  forget(text: string): void;
};

/**
 * Leads a statement never prepared, whose best plan depends on its parameters (optional filters over tenants
 * of every size): prepared, it may settle on a generic plan that reads a big tenant's whole list
 * (docs/performance.md, "Generic plans on a skewed tenant").
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

/** Result columns changed since it was prepared (a migration added one under a `t.*`); a new name fixes it. */
export function isStalePreparedStatement(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === "0A000" && typeof message === "string" && message.includes("cached plan must not change result type");
}
