import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { type BlockReason, classifyAddress } from "./address.js";

/** Every address a host name resolves to. Tests inject one to play DNS (rebinding included). */
export type Resolver = (hostname: string) => Promise<string[]>;

/** The system resolver (getaddrinfo, as every other client on the machine sees the name). */
export const systemResolver: Resolver = async (hostname) => {
  const found = await lookup(hostname, { all: true, verbatim: true });
  return found.map((entry) => entry.address);
};

/** Gives up after `ms` (counted as not resolving), so a subscription request never hangs on a slow DNS server. */
export function resolverWithin(resolve: Resolver, ms: number): Resolver {
  return (hostname) =>
    new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => reject(new Error(`DNS lookup of ${hostname} took over ${ms} ms`)), ms);
      resolve(hostname)
        .then(resolvePromise, reject)
        .finally(() => clearTimeout(timer));
    });
}

/** Normalised `host:port` pairs exempt from the address rules (WEBHOOK_ALLOW_TARGETS). */
export type AllowTargets = ReadonlySet<string>;

/** Each entry parsed as an https origin, so `0x7f.1:8443`, `127.0.0.1:8443` and `2130706433:8443` compare equal. */
export function parseAllowTargets(entries: readonly string[]): AllowTargets {
  const targets = new Set<string>();
  for (const entry of entries) {
    const url = new URL(`https://${entry}/`);
    targets.add(targetKey(url.hostname, url.port));
  }
  return targets;
}

/** The allow-list key of a parsed URL's host name and port (an empty port is https's 443). */
export function targetKey(hostname: string, port: string | number): string {
  return `${hostname.toLowerCase()}:${port === "" ? 443 : port}`;
}

/** An IP literal (bracketed or not) is its own address; a name resolving to nothing is a failure. */
export async function resolveHost(hostname: string, resolve: Resolver): Promise<string[]> {
  const bare = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  if (isIP(bare) !== 0) return [bare];
  const addresses = await resolve(bare);
  if (addresses.length === 0) throw new Error(`${bare} resolves to no address`);
  return addresses;
}

/** The first address the rules refuse, with the reason, or undefined when every one is allowed. */
export function firstBlocked(addresses: readonly string[]): { address: string; reason: BlockReason } | undefined {
  for (const address of addresses) {
    const verdict = classifyAddress(address);
    if (!verdict.allowed) return { address, reason: verdict.reason };
  }
  return undefined;
}

/** How the delivery log and a 422 say why an address is refused. */
export function describeBlocked(address: string, reason: BlockReason): string {
  return `${address} is not a public address (${reason})`;
}
