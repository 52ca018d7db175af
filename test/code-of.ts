/** What a pure rule does with its input: "ok", or the code of the DomainError (or other error) it throws. */
export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return "ok";
  } catch (err) {
    return (err as { code?: string }).code;
  }
}
