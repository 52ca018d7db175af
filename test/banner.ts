// What `npm start`'s first start prints for the dev tenant (start.ts): the @replay/client options
// line, `createReplayClient({ baseUrl: "…", apiKey: "…", signingKey: { tenant, kid, secret } })`,
// which a user copies into a project; tests read the options from it as that user would.

export type BannerClientOptions = {
  baseUrl: string;
  apiKey: string;
  signingKey: { tenant: string; kid: string; secret: string };
};

/** The options of the banner's createReplayClient line, once the line is complete in `output`. */
export function bannerClientOptions(output: string): BannerClientOptions | undefined {
  const line = /^\s+createReplayClient\((\{.*\})\)$/m.exec(output)?.[1];
  if (line === undefined) return undefined;
  const value = (name: string) => new RegExp(`\\b${name}: "([^"]*)"`).exec(line)?.[1];
  const [baseUrl, apiKey, tenant, kid, secret] = ["baseUrl", "apiKey", "tenant", "kid", "secret"].map(value);
  if (!baseUrl || !apiKey || !tenant || !kid || !secret) return undefined;
  return { baseUrl, apiKey, signingKey: { tenant, kid, secret } };
}
