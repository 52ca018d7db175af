// The identity service: tenants, members, API keys and signing keys (IdentityAdminService), in the
// shape of a service (admin-service.ts its handlers, store.ts its schema, migrations/), but hosted
// by the gateway process rather than one of its own: the identity schema is what every public
// request is authenticated against (gateway/auth reads it through store.ts, behind a key cache the
// admin handlers evict from in the same process), so a separate process would put a network hop
// and a second cache in front of every request. It is served on the gateway's internal port
// (gateway/main.ts), never the public one, and publishes its events (identity.*) through the
// identity schema's outbox like any service.

import { randomBytes } from "node:crypto";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Client, Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import type { IdentityAdminService } from "../../gen/replay/identity/v1/admin_pb.js";
import type { ReplaysService } from "../../gen/replay/replays/v1/replays_pb.js";
import type { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import type { WebhookSecretsService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { buildEvent } from "../../lib/bus/events.js";
import { resealAll } from "../../lib/db/reseal-secrets.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { newId, parseUuid } from "../../lib/ids.js";
import { memberRoleName, memberRoles } from "../../lib/member-role.js";
import { keysetAfter, keysetPage } from "../../lib/page/keyset.js";
import { pageSizeOf } from "../../lib/page/size.js";
import { traceOf, trustedHeaders } from "../../lib/rpc/context.js";
import type { SecretBox } from "../../lib/secrets/box.js";
import { hashApiKey, mintApiKey } from "../auth/api-key.js";
import type { KeyCache } from "../auth/key-cache.js";
import { parseScopes, type Scope } from "../auth/scopes.js";
import { rethrowBackendError } from "../forward.js";
import { defaultPlan, hotOverRetention, parseTenantName, planField, retentionFields } from "./plan.js";
import type { PlanInput, TenantRow } from "./store.js";
import * as store from "./store.js";

export type AdminDeps = {
  db: Db;
  keyCache: KeyCache;
  /** Seals the signing keys' secrets before they are stored (lib/secrets/box.ts). */
  secrets: SecretBox;
  /** The webhooks service's secrets at rest, resealed with the signing keys (ReencryptSecrets). */
  webhookSecrets: Client<typeof WebhookSecretsService>;
  servers: Client<typeof ServersService>;
  replays: Client<typeof ReplaysService>;
};

/** Where the signing keys' secrets are sealed at rest (lib/secrets/reseal.ts). */
export const SIGNING_KEY_SECRETS = {
  table: "identity.signing_key",
  id: "kid",
  idType: "text",
  columns: ["secret"],
} as const;

const requireId = (value: string, what: string) => parseUuid(value, "INVALID_ARGUMENT", what);

function tenantUpserted(tenant: TenantRow) {
  return buildEvent("identity.tenant.upserted", {
    tenantId: tenant.tenant_id,
    serverLimit: BigInt(tenant.server_limit),
    storageQuotaBytes: BigInt(tenant.storage_quota_bytes),
    version: BigInt(tenant.version),
    retentionDays: tenant.retention_days,
    hotDays: tenant.hot_days,
  });
}

/** A page request of the List RPCs: its size (decisions.md §5 numbers) and where it starts. */
function pageOf(req: { pageSize?: number; pageToken: string }) {
  const pageSize = pageSizeOf(req.pageSize);
  return { pageSize, after: keysetAfter(req.pageToken) };
}

const timestampOrUnset = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

/**
 * The gateway's internal admin API (INTERNAL_PORT): what the dashboard does for tenants, members
 * and keys. Plan changes are published as identity.tenant.upserted through the outbox, in the
 * transaction that made them.
 */
export function createIdentityAdminService(deps: AdminDeps): ServiceImpl<typeof IdentityAdminService> {
  const { db } = deps;

  /** A per-tenant list answers for an unknown tenant as getTenant does, not with an empty page. */
  async function requireTenantExists(tenantId: string): Promise<void> {
    if (!(await store.findTenantById(db, tenantId))) throw new DomainError("TENANT_NOT_FOUND", `no tenant ${tenantId}`);
  }

  return {
    async createTenant(req, ctx) {
      const retention = retentionFields(req);
      const retentionDays = retention.retentionDays ?? defaultPlan.retentionDays;
      // An unset hot period is the default one, cut to a shorter retention.
      const hotDays = retention.hotDays ?? Math.min(defaultPlan.hotDays, retentionDays);
      if (hotDays > retentionDays) throw hotOverRetention();
      const plan: PlanInput = {
        name: parseTenantName(req.name) ?? defaultPlan.name,
        serverLimit: planField(req.serverLimit, "server limit", 0) ?? defaultPlan.serverLimit,
        storageQuotaBytes: planField(req.storageQuotaBytes, "storage quota", 0) ?? defaultPlan.storageQuotaBytes,
        rateLimitRps: planField(req.rateLimitRps, "rate limit rps", 1) ?? defaultPlan.rateLimitRps,
        rateLimitBurst: planField(req.rateLimitBurst, "rate limit burst", 1) ?? defaultPlan.rateLimitBurst,
        retentionDays,
        hotDays,
      };
      const tenant = await db.transaction(
        async (tx) => {
          const row = await store.insertTenant(tx, newId(), plan);
          await store.enqueueEvent(tx, tenantUpserted(row));
          return row;
        },
        { trace: traceOf(ctx) },
      );
      return { tenantId: tenant.tenant_id };
    },

    async updateTenant(req, ctx) {
      const tenantId = requireId(req.tenantId, "tenant");
      const plan: Partial<PlanInput> = {
        name: parseTenantName(req.name),
        serverLimit: planField(req.serverLimit, "server limit", 0),
        storageQuotaBytes: planField(req.storageQuotaBytes, "storage quota", 0),
        rateLimitRps: planField(req.rateLimitRps, "rate limit rps", 1),
        rateLimitBurst: planField(req.rateLimitBurst, "rate limit burst", 1),
        ...retentionFields(req),
      };
      await db.transaction(
        async (tx) => {
          const row = await store.updateTenantPlan(tx, tenantId, plan);
          if (row === "not-found") throw new DomainError("TENANT_NOT_FOUND", `no tenant ${tenantId}`);
          if (row === "hot-over-retention") throw hotOverRetention();
          await store.enqueueEvent(tx, tenantUpserted(row));
        },
        { trace: traceOf(ctx) },
      );
      return { tenantId };
    },

    async getTenant(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      const tenant = await store.findTenantById(db, tenantId);
      if (!tenant) throw new DomainError("TENANT_NOT_FOUND", `no tenant ${tenantId}`);
      const headers = trustedHeaders({ tenantId });
      const [slots, storage] = await Promise.all([
        usage(() => deps.servers.getSlotUsage({}, { headers }).then((r) => r.serversUsed)),
        usage(() => deps.replays.getStorageUsage({}, { headers }).then((r) => r.storageUsedBytes)),
      ]);
      return {
        tenant: {
          tenantId,
          name: tenant.name,
          serverLimit: BigInt(tenant.server_limit),
          serversUsed: slots,
          storageQuotaBytes: BigInt(tenant.storage_quota_bytes),
          storageUsedBytes: storage,
          rateLimitRps: tenant.rate_limit_rps,
          rateLimitBurst: tenant.rate_limit_burst,
          retentionDays: tenant.retention_days,
          hotDays: tenant.hot_days,
        },
      };
    },

    async listTenants(req) {
      const { pageSize, after } = pageOf(req);
      const rows = await store.listTenants(db, { after, limit: pageSize + 1 });
      const page = keysetPage(rows, pageSize, after, (row) => row.tenant_id);
      return {
        tenants: page.rows.map((row) => ({
          tenantId: row.tenant_id,
          name: row.name,
          serverLimit: BigInt(row.server_limit),
          storageQuotaBytes: BigInt(row.storage_quota_bytes),
          rateLimitRps: row.rate_limit_rps,
          rateLimitBurst: row.rate_limit_burst,
          retentionDays: row.retention_days,
          hotDays: row.hot_days,
          createdAt: timestampFromDate(row.created_at),
        })),
        nextPageToken: page.nextPageToken,
      };
    },

    async addMember(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      const role = memberRoleName(req.role);
      if (!role) throw new DomainError("INVALID_ARGUMENT", "role must be owner, admin, member or viewer");
      if (!(await store.findTenantById(db, tenantId)))
        throw new DomainError("TENANT_NOT_FOUND", `no tenant ${tenantId}`);
      const memberId = newId();
      await store.insertMember(db, memberId, tenantId, role, req.instanceSettings ?? true);
      return { memberId };
    },

    async updateMember(req) {
      const memberId = requireId(req.memberId, "member");
      const role = req.role === MemberRole.UNSPECIFIED ? undefined : memberRoleName(req.role);
      if (req.role !== MemberRole.UNSPECIFIED && !role) throw new DomainError("INVALID_ARGUMENT", "unknown role");
      if (!(await store.updateMember(db, memberId, role, req.instanceSettings))) {
        throw new DomainError("MEMBER_NOT_FOUND", `no member ${memberId}`);
      }
      return { memberId };
    },

    async removeMember(req) {
      const memberId = requireId(req.memberId, "member");
      if (!(await store.updateMemberRemoved(db, memberId)))
        throw new DomainError("MEMBER_NOT_FOUND", `no member ${memberId}`);
      return { memberId };
    },

    async grantMember(req) {
      const memberId = requireId(req.memberId, "member");
      if ((req.categoryId === "") === (req.serverId === "")) {
        throw new DomainError("INVALID_ARGUMENT", "grant exactly one of a category or a server");
      }
      const grant = req.categoryId
        ? { categoryId: requireId(req.categoryId, "category") }
        : { serverId: requireId(req.serverId, "server") };
      if (!(await store.findMemberById(db, memberId)))
        throw new DomainError("MEMBER_NOT_FOUND", `no member ${memberId}`);
      await store.insertMemberGrant(db, memberId, grant);
      return { memberId };
    },

    async listMembers(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      const { pageSize, after } = pageOf(req);
      await requireTenantExists(tenantId);
      const rows = await store.listMembersByTenant(db, tenantId, { after, limit: pageSize + 1 });
      const page = keysetPage(rows, pageSize, after, (row) => row.member_id);
      return {
        members: page.rows.map((row) => ({
          memberId: row.member_id,
          role: memberRoles[row.role],
          instanceSettings: row.instance_settings,
          createdAt: timestampFromDate(row.created_at),
          removedAt: timestampOrUnset(row.removed_at),
          grantedCategoryIds: row.granted_category_ids,
          grantedServerIds: row.granted_server_ids,
        })),
        nextPageToken: page.nextPageToken,
      };
    },

    async createApiKey(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      let scopes: Scope[];
      try {
        scopes = parseScopes(req.scopes.join(","));
      } catch (err) {
        throw new DomainError("INVALID_ARGUMENT", (err as Error).message);
      }
      if (!(await store.findTenantById(db, tenantId)))
        throw new DomainError("TENANT_NOT_FOUND", `no tenant ${tenantId}`);
      let memberId: string | null = null;
      if (req.memberId !== "") {
        memberId = requireId(req.memberId, "member");
        const member = await store.findMemberById(db, memberId);
        if (!member || member.tenant_id !== tenantId)
          throw new DomainError("MEMBER_NOT_FOUND", `no member ${memberId} in tenant ${tenantId}`);
        if (member.removed)
          throw new DomainError("INVALID_ARGUMENT", `member ${memberId} was removed; it cannot mint keys`);
      }
      const key = mintApiKey();
      const keyId = newId();
      await store.insertApiKey(db, { keyId, tenantId, memberId, keyHash: hashApiKey(key), scopes });
      return { keyId, key };
    },

    async revokeApiKey(req, ctx) {
      const keyId = requireId(req.keyId, "key id");
      const revoked = await db.transaction(
        async (tx) => {
          const row = await store.updateApiKeyRevoked(tx, keyId);
          if (!row) throw new DomainError("KEY_NOT_FOUND", `no key ${keyId}`);
          await store.enqueueEvent(
            tx,
            buildEvent("identity.key.revoked", { tenantId: row.tenant_id, keyId, keyHash: row.key_hash }),
          );
          return row;
        },
        { trace: traceOf(ctx) },
      );
      // This replica drops it now; the others on the broadcast, and within the cache TTL at worst.
      deps.keyCache.evict(revoked.key_hash);
      return { keyId };
    },

    async listApiKeys(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      const { pageSize, after } = pageOf(req);
      await requireTenantExists(tenantId);
      const rows = await store.listApiKeysByTenant(db, tenantId, { after, limit: pageSize + 1 });
      const page = keysetPage(rows, pageSize, after, (row) => row.key_id);
      return {
        keys: page.rows.map((row) => ({
          keyId: row.key_id,
          scopes: row.scopes,
          memberId: row.member_id ?? "",
          createdAt: timestampFromDate(row.created_at),
          revokedAt: timestampOrUnset(row.revoked_at),
        })),
        nextPageToken: page.nextPageToken,
      };
    },

    async createSigningKey(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      if (!(await store.findTenantById(db, tenantId)))
        throw new DomainError("TENANT_NOT_FOUND", `no tenant ${tenantId}`);
      const kid = `kid_${randomBytes(12).toString("hex")}`;
      const secret = `sks_${randomBytes(32).toString("base64url")}`;
      await store.insertSigningKey(db, kid, tenantId, deps.secrets.seal(secret));
      return { kid, secret };
    },

    async reencryptSecrets() {
      const signing = await resealAll(db, SIGNING_KEY_SECRETS, deps.secrets);
      const webhooks = await deps.webhookSecrets.resealSecrets({});
      return {
        stores: [
          {
            store: SIGNING_KEY_SECRETS.table,
            resealed: BigInt(signing.resealed),
            unreadable: BigInt(signing.unreadable),
          },
          { store: "webhooks.subscription", resealed: webhooks.resealed, unreadable: webhooks.unreadable },
        ],
      };
    },

    async listCategories(req) {
      const tenantId = requireId(req.tenantId, "tenant");
      const { pageSize } = pageOf(req);
      await requireTenantExists(tenantId);
      // Categories live in the servers schema; that service pages them and checks the token.
      return deps.servers
        .listCategories({ pageSize, pageToken: req.pageToken }, { headers: trustedHeaders({ tenantId }) })
        .then((res) => ({ categories: res.categories, nextPageToken: res.nextPageToken }), rethrowBackendError);
    },
  };
}

/** Usage figures from a service that is not built yet read as 0 rather than failing `tenant show`. */
async function usage(fetch: () => Promise<bigint>): Promise<bigint> {
  try {
    return await fetch();
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.Unimplemented) return 0n;
    throw err;
  }
}
