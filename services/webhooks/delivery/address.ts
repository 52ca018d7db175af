import { BlockList, isIPv4, isIPv6 } from "node:net";

/** Why a webhook may not connect to an address (decisions.md §6 URL rules): only global unicast is allowed. */
export type BlockReason =
  | "not-an-ip-address"
  | "unspecified"
  | "this-network"
  | "private"
  | "loopback"
  | "link-local"
  | "cgnat"
  | "documentation"
  | "benchmark"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "unique-local"
  | "teredo"
  | "not-global-unicast";

export type AddressVerdict = { allowed: true } | { allowed: false; reason: BlockReason };

type Rule = readonly [BlockReason, BlockList];

// net.BlockList does the CIDR matching; rule order decides the reason where ranges nest (broadcast inside 240/4).
function rule(reason: BlockReason, type: "ipv4" | "ipv6", cidrs: readonly string[]): Rule {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [network = "", prefix = ""] = cidr.split("/");
    list.addSubnet(network, Number(prefix), type);
  }
  return [reason, list];
}

// IANA's IPv4 special-purpose registry, all blocked, even entries marked globally reachable (192.0.0.9).
const ipv4Rules: readonly Rule[] = [
  rule("unspecified", "ipv4", ["0.0.0.0/32"]),
  rule("this-network", "ipv4", ["0.0.0.0/8"]),
  rule("private", "ipv4", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]),
  rule("loopback", "ipv4", ["127.0.0.0/8"]),
  rule("link-local", "ipv4", ["169.254.0.0/16"]),
  rule("cgnat", "ipv4", ["100.64.0.0/10"]),
  rule("documentation", "ipv4", ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]),
  rule("benchmark", "ipv4", ["198.18.0.0/15"]),
  rule("multicast", "ipv4", ["224.0.0.0/4"]),
  rule("broadcast", "ipv4", ["255.255.255.255/32"]),
  rule("reserved", "ipv4", ["240.0.0.0/4", "192.0.0.0/24", "192.88.99.0/24", "192.31.196.0/24", "192.52.193.0/24"]),
];

// Checked after the forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4) are unwrapped.
const ipv6Rules: readonly Rule[] = [
  rule("unspecified", "ipv6", ["::/128"]),
  rule("loopback", "ipv6", ["::1/128"]),
  rule("teredo", "ipv6", ["2001::/32"]),
  rule("documentation", "ipv6", ["2001:db8::/32", "3fff::/20"]),
  rule("benchmark", "ipv6", ["2001:2::/48"]),
  // 2001::/23 is the IETF protocol assignments block; 64:ff9b:1::/48 is local-use NAT64; 100::/64 discards.
  rule("reserved", "ipv6", ["2001::/23", "64:ff9b:1::/48", "100::/64"]),
  rule("unique-local", "ipv6", ["fc00::/7"]),
  rule("link-local", "ipv6", ["fe80::/10"]),
  rule("multicast", "ipv6", ["ff00::/8"]),
];

const globalUnicast = rule("not-global-unicast", "ipv6", ["2000::/3"])[1];

/** IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by it: packets end up there. */
export function classifyAddress(address: string): AddressVerdict {
  if (isIPv4(address)) return classifyIpv4(address);
  // A zone index (fe80::1%eth0) only ever qualifies a link-local address; judge the address itself.
  const bare = address.split("%")[0] ?? "";
  if (!isIPv6(bare)) return { allowed: false, reason: "not-an-ip-address" };
  return classifyIpv6(bare);
}

function classifyIpv4(address: string): AddressVerdict {
  for (const [reason, list] of ipv4Rules) {
    if (list.check(address, "ipv4")) return { allowed: false, reason };
  }
  return { allowed: true };
}

function classifyIpv6(address: string): AddressVerdict {
  const groups = ipv6Groups(address);
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = groups;
  const upperZero = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0;
  if (upperZero && g5 === 0xffff) return classifyIpv4(ipv4FromGroups(g6, g7));
  if (upperZero && g5 === 0 && g6 !== 0) {
    // IPv4-compatible addresses are deprecated (RFC 4291 §2.5.5.1): blocked even with a public IPv4.
    const embedded = classifyIpv4(ipv4FromGroups(g6, g7));
    return embedded.allowed ? { allowed: false, reason: "reserved" } : embedded;
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return classifyIpv4(ipv4FromGroups(g6, g7));
  }
  if (g0 === 0x2002) {
    const embedded = classifyIpv4(ipv4FromGroups(g1 ?? 0, g2 ?? 0));
    if (!embedded.allowed) return embedded;
  }
  for (const [reason, list] of ipv6Rules) {
    if (list.check(address, "ipv6")) return { allowed: false, reason };
  }
  if (!globalUnicast.check(address, "ipv6")) return { allowed: false, reason: "not-global-unicast" };
  return { allowed: true };
}

function ipv4FromGroups(high: number, low: number): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join(".");
}

/** The eight 16-bit groups of an address that isIPv6 accepted (so "::" occurs at most once). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left = "", right] = text.split("::");
  const head = left === "" ? [] : left.split(":");
  const tail = right === undefined || right === "" ? [] : right.split(":");
  const fill = right === undefined ? 0 : 8 - head.length - tail.length;
  return [...head, ...Array<string>(fill).fill("0"), ...tail].map((group) => Number.parseInt(group, 16));
}
