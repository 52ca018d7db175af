import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { internalTokenInterceptor } from "../lib/rpc/internal-token.js";
import { SCOPES } from "./auth/scopes.js";

export type DevTenant = { tenantId: string; memberId: string; keyId: string; key: string; kid: string; secret: string };

/** The dev tenant as a later start finds it: its id and its owner, with no secret (none is kept). */
export type KnownDevTenant = { tenantId: string; ownerMemberId: string | undefined };

function adminClient(internalUrl: string, token: string | undefined): Client<typeof IdentityAdminService> {
  const interceptors = token ? [internalTokenInterceptor(token)] : [];
  return createClient(
    IdentityAdminService,
    createConnectTransport({ baseUrl: internalUrl, httpVersion: "2", interceptors }),
  );
}

/**
 * The ready-to-use tenant `npm start` prints on a fresh data directory (operations.md "Starting"):
 * an owner, an API key with every scope bound to it, and a signing key. It goes through the
 * internal admin API like replayctl does; the secrets are printed this once and stored only hashed
 * (the key) or for verification (the signing secret).
 */
export async function createDevTenant(internalUrl: string, token: string | undefined): Promise<DevTenant> {
  const admin = adminClient(internalUrl, token);
  const { tenantId } = await admin.createTenant({ name: "dev" });
  const { memberId } = await admin.addMember({ tenantId, role: MemberRole.OWNER });
  const { keyId, key } = await admin.createApiKey({ tenantId, memberId, scopes: [...SCOPES] });
  const { kid, secret } = await admin.createSigningKey({ tenantId });
  return { tenantId, memberId, keyId, key, kid, secret };
}

/**
 * The dev tenant on a later start on the same data: the oldest tenant (the first start created it
 * before anything else could exist) and its oldest owner not removed, if any. Undefined when there
 * is no tenant at all.
 */
export async function findDevTenant(
  internalUrl: string,
  token: string | undefined,
): Promise<KnownDevTenant | undefined> {
  const admin = adminClient(internalUrl, token);
  const [tenant] = (await admin.listTenants({ pageSize: 1 })).tenants;
  if (!tenant) return undefined;
  // The dev tenant has one member; a page of the most members a request allows is plenty.
  const { members } = await admin.listMembers({ tenantId: tenant.tenantId, pageSize: 100 });
  const owner = members.find((m) => m.role === MemberRole.OWNER && m.removedAt === undefined);
  return { tenantId: tenant.tenantId, ownerMemberId: owner?.memberId };
}

/** The replayctl command that mints a key like the dev tenant's first one: every scope, bound to the owner. */
export function devKeyCommand(dev: KnownDevTenant): string {
  const member = dev.ownerMemberId ? ` --member ${dev.ownerMemberId}` : "";
  return `npx replayctl key create --tenant ${dev.tenantId} --scopes ${SCOPES.join(",")}${member}`;
}
