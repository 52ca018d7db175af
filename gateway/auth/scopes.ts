// The API key scopes of spec/decisions.md §2; a key route names the one it needs.
export const SCOPES = ["replays:read", "replays:write", "servers:read", "servers:write", "collections:write"] as const;

export type Scope = (typeof SCOPES)[number];

const KNOWN: ReadonlySet<string> = new Set(SCOPES);

export function isScope(text: string): text is Scope {
  return KNOWN.has(text);
}

/**
 * Parses a comma separated scope list (as typed to replayctl): items are trimmed, repeats are
 * dropped keeping the first, and the result is in the order given. Throws an Error naming the
 * first empty or unknown item, because a key silently minted with fewer scopes than asked for
 * would only fail later, far from the typo.
 */
export function parseScopes(text: string): Scope[] {
  const scopes: Scope[] = [];
  for (const raw of text.split(",")) {
    const item = raw.trim();
    if (item === "") throw new Error(`empty scope in "${text}"; valid scopes: ${SCOPES.join(", ")}`);
    if (!isScope(item)) throw new Error(`unknown scope "${item}"; valid scopes: ${SCOPES.join(", ")}`);
    if (!scopes.includes(item)) scopes.push(item);
  }
  return scopes;
}
