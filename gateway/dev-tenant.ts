import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { internalTokenInterceptor } from "../lib/rpc/internal-token.js";
import { SCOPES } from "./auth/scopes.js";

export type DevTenant = { tenantId: string; memberId: string; keyId: string; key: string; kid: string; secret: string };

/**
 * The ready-to-use tenant `npm start` prints on a fresh data directory (operations.md "Starting"):
 * an owner, an API key with every scope bound to it, and a signing key. It goes through the
 * internal admin API like replayctl does; the secrets are printed this once and stored only hashed
 * (the key) or for verification (the signing secret).
 */
export async function createDevTenant(internalUrl: string, token: string | undefined): Promise<DevTenant> {
  const interceptors = token ? [internalTokenInterceptor(token)] : [];
  const admin = createClient(
    IdentityAdminService,
    createConnectTransport({ baseUrl: internalUrl, httpVersion: "2", interceptors }),
  );
  const { tenantId } = await admin.createTenant({ name: "dev" });
  const { memberId } = await admin.addMember({ tenantId, role: MemberRole.OWNER });
  const { keyId, key } = await admin.createApiKey({ tenantId, memberId, scopes: [...SCOPES] });
  const { kid, secret } = await admin.createSigningKey({ tenantId });
  return { tenantId, memberId, keyId, key, kid, secret };
}
