// The request target as the gateway routes and signs it.

/** The path and the raw query (without its "?") of a request target. */
export function splitUrl(url: string): [string, string] {
  const at = url.indexOf("?");
  return at === -1 ? [url, ""] : [url.slice(0, at), url.slice(at + 1)];
}

/**
 * The origin form of a request target (RFC 9112 §3.2): an absolute-form target
 * (`http://host/v1/replays?x=1`) names the same resource as its path and query, so it is routed and
 * signed as `/v1/replays?x=1`. Other targets are returned as they are.
 */
export function originForm(target: string): string {
  if (target.startsWith("/")) return target;
  const authority = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target);
  if (!authority) return target;
  const rest = target.slice(authority[0].length);
  return rest.startsWith("/") ? rest : `/${rest}`;
}

/**
 * A path that does not percent-decode (`/v1/api/servers/%E0%A4%A`) is routed with its `%` taken
 * literally, so it meets the check order of any other request: 404 for an unknown path, and on a
 * known one authentication first, then the route's own id code. Signatures cover the original.
 */
export function decodableUrl(url: string): string {
  const [path, query] = splitUrl(url);
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    return path.replaceAll("%", "%25") + (url.length > path.length ? `?${query}` : "");
  }
}
