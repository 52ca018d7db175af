import type { AddressInfo } from "node:net";

/** The address a listener really bound, as a URL: what the start banner prints (0.0.0.0 when widened). */
export function boundUrl(address: AddressInfo): string {
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}
