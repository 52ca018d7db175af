import { describe, expect, it } from "vitest";
import { type BlockReason, classifyAddress } from "./address.js";

const blocked: ReadonlyArray<readonly [string, BlockReason]> = [
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "this-network"],
  ["10.0.0.1", "private"],
  ["10.255.255.255", "private"],
  ["172.16.0.1", "private"],
  ["172.31.255.254", "private"],
  ["192.168.1.1", "private"],
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["169.254.169.254", "link-local"],
  ["100.64.0.1", "cgnat"],
  ["100.127.255.254", "cgnat"],
  ["192.0.2.1", "documentation"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.200", "documentation"],
  ["198.18.0.1", "benchmark"],
  ["198.19.255.254", "benchmark"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["255.255.255.255", "broadcast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.254", "reserved"],
  ["192.0.0.8", "reserved"],
  ["192.88.99.1", "reserved"],
  ["::", "unspecified"],
  ["::1", "loopback"],
  ["0:0:0:0:0:0:0:1", "loopback"],
  ["fc00::1", "unique-local"],
  ["fd12:3456:789a::1", "unique-local"],
  ["fe80::1", "link-local"],
  ["fe80::1%eth0", "link-local"],
  ["febf:ffff::1", "link-local"],
  ["ff02::1", "multicast"],
  ["ff0e::1", "multicast"],
  ["2001:db8::1", "documentation"],
  ["2001:db8:ffff::1", "documentation"],
  ["3fff::1", "documentation"],
  ["2001:2::1", "benchmark"],
  ["2001::1", "teredo"],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"],
  ["2001:10::1", "reserved"],
  ["100::1", "reserved"],
  ["64:ff9b:1::1", "reserved"],
  ["fec0::1", "not-global-unicast"],
  ["4000::1", "not-global-unicast"],
  ["::2", "not-global-unicast"],
  // IPv4-mapped: the mapped IPv4 address decides, in both spellings.
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::ffff:10.1.2.3", "private"],
  ["::ffff:169.254.169.254", "link-local"],
  ["0:0:0:0:0:ffff:c0a8:0101", "private"],
  // IPv4-compatible (deprecated): blocked, with the embedded address's reason when it has one.
  ["::127.0.0.1", "loopback"],
  ["::8.8.8.8", "reserved"],
  // NAT64 and 6to4 carry an IPv4 address that is vetted.
  ["64:ff9b::127.0.0.1", "loopback"],
  ["64:ff9b::a00:1", "private"],
  ["2002:7f00:1::1", "loopback"],
  ["2002:c0a8:101::", "private"],
  ["2002:6440:1::1", "cgnat"],
  ["not an address", "not-an-ip-address"],
  ["example.com", "not-an-ip-address"],
  ["", "not-an-ip-address"],
  ["1.2.3", "not-an-ip-address"],
];

const allowed = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.216.34",
  "172.15.255.255",
  "172.32.0.1",
  "100.63.255.255",
  "100.128.0.1",
  "198.17.255.255",
  "198.20.0.1",
  "223.255.255.255",
  "2606:4700:4700::1111",
  "2a00:1450:4001:80b::200e",
  "2001:4860:4860::8888",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808",
  "2002:808:808::1",
];

describe("classifyAddress", () => {
  it.each(blocked)("blocks %s as %s", (address, reason) => {
    expect(classifyAddress(address)).toEqual({ allowed: false, reason });
  });

  it.each(allowed)("allows the global unicast address %s", (address) => {
    expect(classifyAddress(address)).toEqual({ allowed: true });
  });
});
