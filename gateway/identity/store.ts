import type { OutgoingEvent } from "../../lib/bus/events.js";
import { enqueue } from "../../lib/bus/outbox.js";
import type { Queryable, Tx } from "../../lib/db/types.js";
import type { MemberRoleName } from "../../lib/member-role.js";

/** The tenant's plan, as the gateway enforces it and the identity events publish it. */
export type TenantRow = {
  tenant_id: string;
  name: string;
  server_limit: number;
  storage_quota_bytes: number;
  rate_limit_rps: number;
  rate_limit_burst: number;
  retention_days: number;
  hot_days: number;
  version: number;
};

/** What an API key resolves to on every request (cached briefly by the key cache). */
export type ApiKeyIdentityRow = {
  key_id: string;
  tenant_id: string;
  member_id: string | null;
  scopes: string[];
  rate_limit_rps: number;
  rate_limit_burst: number;
};

export type MemberRow = {
  member_id: string;
  tenant_id: string;
  role: MemberRoleName;
  instance_settings: boolean;
  removed: boolean;
  granted_category_ids: string[];
  granted_server_ids: string[];
};

/** A tenant as the operator list shows it: its plan and when it was created. */
export type TenantListRow = TenantRow & { created_at: Date };

/** A member as the operator list shows it, removed ones included. */
export type MemberListRow = Omit<MemberRow, "tenant_id" | "removed"> & { created_at: Date; removed_at: Date | null };

/** An API key as the operator list shows it: never the key, never its hash. */
export type ApiKeyListRow = {
  key_id: string;
  member_id: string | null;
  scopes: string[];
  created_at: Date;
  revoked_at: Date | null;
};

/** One keyset page: the rows after the one `after` names (from the start when null), at most `limit`. */
export type KeysetPage = { after: string | null; limit: number };

export type PlanInput = {
  name: string;
  serverLimit: number;
  storageQuotaBytes: number;
  rateLimitRps: number;
  rateLimitBurst: number;
  retentionDays: number;
  hotDays: number;
};

const tenantColumns =
  "tenant_id, name, server_limit, storage_quota_bytes, rate_limit_rps, rate_limit_burst, retention_days, hot_days, version";

// SQL for the `identity` schema, and nothing else. Every function runs on the connection it is given.

/** Records an event in this schema's outbox, in the caller's transaction. */
export function enqueueEvent(tx: Tx, event: OutgoingEvent): Promise<void> {
  return enqueue(tx, "identity", event);
}

export async function findApiKeyIdentityByHash(q: Queryable, keyHash: string): Promise<ApiKeyIdentityRow | undefined> {
  const { rows } = await q.query<ApiKeyIdentityRow>(
    `SELECT k.key_id, k.tenant_id, k.member_id, k.scopes, t.rate_limit_rps, t.rate_limit_burst
       FROM identity.api_key k JOIN identity.tenant t USING (tenant_id)
      WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
    [keyHash],
  );
  return rows[0];
}

export async function findSigningKeyByKid(
  q: Queryable,
  kid: string,
): Promise<{ tenant_id: string; secret: string } | undefined> {
  const { rows } = await q.query<{ tenant_id: string; secret: string }>(
    "SELECT tenant_id, secret FROM identity.signing_key WHERE kid = $1 AND revoked_at IS NULL",
    [kid],
  );
  return rows[0];
}

/** Records a nonce's first use; false when the kid already used it within the window. */
export async function insertNonce(q: Queryable, kid: string, nonce: string, expiresAt: Date): Promise<boolean> {
  const { rowCount } = await q.query(
    "INSERT INTO identity.nonce (kid, nonce, expires_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    [kid, nonce, expiresAt],
  );
  return rowCount === 1;
}

/**
 * Deletes at most `limit` nonces expired by `now`, the longest expired first (nonce_expires_idx), in
 * one statement: a sweep after a long pause goes batch by batch instead of in one long DELETE.
 */
export async function deleteNoncesExpired(q: Queryable, now: Date, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM identity.nonce WHERE ctid IN (
       SELECT ctid FROM identity.nonce WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)`,
    [now, limit],
  );
  return rowCount;
}

/** The member's state right now, with its grants: read on every request that needs it, never cached. */
export async function findMemberById(q: Queryable, memberId: string): Promise<MemberRow | undefined> {
  const { rows } = await q.query<MemberRow>(
    `SELECT m.member_id, m.tenant_id, m.role, m.instance_settings, m.removed_at IS NOT NULL AS removed,
            COALESCE(array_agg(g.category_id::text) FILTER (WHERE g.category_id IS NOT NULL), '{}') AS granted_category_ids,
            COALESCE(array_agg(g.server_id::text) FILTER (WHERE g.server_id IS NOT NULL), '{}') AS granted_server_ids
       FROM identity.member m LEFT JOIN identity.member_grant g USING (member_id)
      WHERE m.member_id = $1
      GROUP BY m.member_id`,
    [memberId],
  );
  return rows[0];
}

/** $1 to $8 of the plan statements: the tenant, then the plan's fields in column order (unset: null). */
function planParams(tenantId: string, plan: Partial<PlanInput>): unknown[] {
  return [
    tenantId,
    plan.name,
    plan.serverLimit,
    plan.storageQuotaBytes,
    plan.rateLimitRps,
    plan.rateLimitBurst,
    plan.retentionDays,
    plan.hotDays,
  ];
}

export async function insertTenant(tx: Tx, tenantId: string, plan: PlanInput): Promise<TenantRow> {
  const { rows } = await tx.query<TenantRow>(
    `INSERT INTO identity.tenant (tenant_id, name, server_limit, storage_quota_bytes, rate_limit_rps, rate_limit_burst,
                                  retention_days, hot_days)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING ${tenantColumns}`,
    planParams(tenantId, plan),
  );
  return rows[0] as TenantRow;
}

/**
 * Changes the set fields of a tenant's plan. "not-found" for an unknown tenant; "hot-over-retention"
 * when the hot period would exceed the retention, the stored value standing in for an unset one
 * (checked in the statement itself, so two updates racing cannot combine into a bad plan).
 */
export async function updateTenantPlan(
  tx: Tx,
  tenantId: string,
  plan: Partial<PlanInput>,
): Promise<TenantRow | "not-found" | "hot-over-retention"> {
  const { rows } = await tx.query<TenantRow>(
    `UPDATE identity.tenant
        SET name = COALESCE($2, name),
            server_limit = COALESCE($3, server_limit),
            storage_quota_bytes = COALESCE($4, storage_quota_bytes),
            rate_limit_rps = COALESCE($5, rate_limit_rps),
            rate_limit_burst = COALESCE($6, rate_limit_burst),
            retention_days = COALESCE($7, retention_days),
            hot_days = COALESCE($8, hot_days),
            version = version + 1,
            updated_at = now()
      WHERE tenant_id = $1 AND COALESCE($8::int, hot_days) <= COALESCE($7::int, retention_days)
     RETURNING ${tenantColumns}`,
    planParams(tenantId, plan),
  );
  if (rows[0]) return rows[0];
  return (await findTenantById(tx, tenantId)) ? "hot-over-retention" : "not-found";
}

export async function findTenantById(q: Queryable, tenantId: string): Promise<TenantRow | undefined> {
  const { rows } = await q.query<TenantRow>(`SELECT ${tenantColumns} FROM identity.tenant WHERE tenant_id = $1`, [
    tenantId,
  ]);
  return rows[0];
}

/** Every tenant, oldest first, then by id, one keyset page at a time. */
export async function listTenants(q: Queryable, page: KeysetPage): Promise<TenantListRow[]> {
  const { rows } = await q.query<TenantListRow>(
    `SELECT ${tenantColumns}, created_at
       FROM identity.tenant
      WHERE $1::uuid IS NULL
         OR (created_at, tenant_id) > (SELECT created_at, tenant_id FROM identity.tenant WHERE tenant_id = $1)
      ORDER BY created_at, tenant_id
      LIMIT $2`,
    [page.after, page.limit],
  );
  return rows;
}

export async function countTenants(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ n: number }>("SELECT count(*)::int AS n FROM identity.tenant");
  return rows[0]?.n ?? 0;
}

/** The tenant's members with their grants, removed ones included, oldest first, then by id. */
export async function listMembersByTenant(q: Queryable, tenantId: string, page: KeysetPage): Promise<MemberListRow[]> {
  const { rows } = await q.query<MemberListRow>(
    `SELECT m.member_id, m.role, m.instance_settings, m.created_at, m.removed_at,
            COALESCE(array_agg(g.category_id::text ORDER BY g.category_id) FILTER (WHERE g.category_id IS NOT NULL), '{}') AS granted_category_ids,
            COALESCE(array_agg(g.server_id::text ORDER BY g.server_id) FILTER (WHERE g.server_id IS NOT NULL), '{}') AS granted_server_ids
       FROM identity.member m LEFT JOIN identity.member_grant g USING (member_id)
      WHERE m.tenant_id = $1
        AND ($2::uuid IS NULL OR (m.created_at, m.member_id) >
             (SELECT created_at, member_id FROM identity.member WHERE tenant_id = $1 AND member_id = $2))
      GROUP BY m.member_id
      ORDER BY m.created_at, m.member_id
      LIMIT $3`,
    [tenantId, page.after, page.limit],
  );
  return rows;
}

export async function insertMember(
  q: Queryable,
  memberId: string,
  tenantId: string,
  role: string,
  instanceSettings: boolean,
): Promise<void> {
  await q.query("INSERT INTO identity.member (member_id, tenant_id, role, instance_settings) VALUES ($1, $2, $3, $4)", [
    memberId,
    tenantId,
    role,
    instanceSettings,
  ]);
}

export async function updateMember(
  q: Queryable,
  memberId: string,
  role: string | undefined,
  instanceSettings: boolean | undefined,
): Promise<boolean> {
  const { rowCount } = await q.query(
    `UPDATE identity.member SET role = COALESCE($2, role), instance_settings = COALESCE($3, instance_settings)
      WHERE member_id = $1`,
    [memberId, role ?? null, instanceSettings ?? null],
  );
  return rowCount === 1;
}

export async function updateMemberRemoved(q: Queryable, memberId: string): Promise<boolean> {
  const { rowCount } = await q.query(
    "UPDATE identity.member SET removed_at = COALESCE(removed_at, now()) WHERE member_id = $1",
    [memberId],
  );
  return rowCount === 1;
}

export async function insertMemberGrant(
  q: Queryable,
  memberId: string,
  grant: { categoryId?: string; serverId?: string },
): Promise<void> {
  await q.query(
    "INSERT INTO identity.member_grant (member_id, category_id, server_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    [memberId, grant.categoryId ?? null, grant.serverId ?? null],
  );
}

export async function insertApiKey(
  q: Queryable,
  key: {
    keyId: string;
    tenantId: string;
    memberId: string | null;
    keyHash: string;
    scopes: string[];
  },
): Promise<void> {
  await q.query(
    "INSERT INTO identity.api_key (key_id, tenant_id, member_id, key_hash, scopes) VALUES ($1, $2, $3, $4, $5)",
    [key.keyId, key.tenantId, key.memberId, key.keyHash, key.scopes],
  );
}

/** The tenant's API keys, revoked ones included, oldest first, then by id; no key hash leaves here. */
export async function listApiKeysByTenant(q: Queryable, tenantId: string, page: KeysetPage): Promise<ApiKeyListRow[]> {
  const { rows } = await q.query<ApiKeyListRow>(
    `SELECT key_id, member_id, scopes, created_at, revoked_at
       FROM identity.api_key
      WHERE tenant_id = $1
        AND ($2::uuid IS NULL OR (created_at, key_id) >
             (SELECT created_at, key_id FROM identity.api_key WHERE tenant_id = $1 AND key_id = $2))
      ORDER BY created_at, key_id
      LIMIT $3`,
    [tenantId, page.after, page.limit],
  );
  return rows;
}

export async function updateApiKeyRevoked(
  tx: Tx,
  keyId: string,
): Promise<{ tenant_id: string; key_hash: string } | undefined> {
  const { rows } = await tx.query<{ tenant_id: string; key_hash: string }>(
    `UPDATE identity.api_key SET revoked_at = COALESCE(revoked_at, now()) WHERE key_id = $1
     RETURNING tenant_id, key_hash`,
    [keyId],
  );
  return rows[0];
}

export async function insertSigningKey(q: Queryable, kid: string, tenantId: string, secret: string): Promise<void> {
  await q.query("INSERT INTO identity.signing_key (kid, tenant_id, secret) VALUES ($1, $2, $3)", [
    kid,
    tenantId,
    secret,
  ]);
}
