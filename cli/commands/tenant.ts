import { type Command, command, type Values } from "../command.js";
import { int32, int64, pageFlags, pageOf, required, text } from "../flags.js";
import { iso, present } from "../respond.js";

const planFlags = {
  name: text("N"),
  "server-limit": int64(0n),
  "storage-quota-bytes": int64(0n),
  "rate-limit-rps": int32(1),
  "rate-limit-burst": int32(1),
  // The admin API's range (RETENTION_DAYS_MAX); hot days within the retention is checked there.
  "retention-days": int32(1, 3650),
  "hot-days": int32(0, 3650),
};

function planOf(v: Values<typeof planFlags>) {
  return {
    name: v.name,
    serverLimit: v["server-limit"],
    storageQuotaBytes: v["storage-quota-bytes"],
    rateLimitRps: v["rate-limit-rps"],
    rateLimitBurst: v["rate-limit-burst"],
    retentionDays: v["retention-days"],
    hotDays: v["hot-days"],
  };
}

/** replayctl tenant … (spec/operations.md §replayctl). */
export const tenantCommands: readonly Command[] = [
  command({
    noun: "tenant",
    verb: "create",
    flags: planFlags,
    run: async (c, v) => {
      const res = await c.admin.createTenant(planOf(v));
      return { tenantId: res.tenantId };
    },
  }),
  command({
    noun: "tenant",
    verb: "update",
    flags: { tenant: required(text("T")), ...planFlags },
    run: async (c, v) => {
      const res = await c.admin.updateTenant({ tenantId: v.tenant, ...planOf(v) });
      return { tenantId: res.tenantId };
    },
  }),
  command({
    noun: "tenant",
    verb: "show",
    flags: { tenant: required(text("T")) },
    run: async (c, v) => {
      const t = present((await c.admin.getTenant({ tenantId: v.tenant })).tenant, "a tenant");
      return {
        tenantId: t.tenantId,
        name: t.name,
        serverLimit: Number(t.serverLimit),
        serversUsed: Number(t.serversUsed),
        storageQuotaBytes: Number(t.storageQuotaBytes),
        storageUsedBytes: Number(t.storageUsedBytes),
        rateLimitRps: t.rateLimitRps,
        rateLimitBurst: t.rateLimitBurst,
        retentionDays: t.retentionDays,
        hotDays: t.hotDays,
      };
    },
  }),
  command({
    noun: "tenant",
    verb: "list",
    flags: pageFlags,
    run: async (c, v) => {
      // Plans only: usage (serversUsed, storageUsedBytes) costs a call to two services per tenant.
      const res = await c.admin.listTenants(pageOf(v));
      return {
        tenants: res.tenants.map((t) => ({
          tenantId: t.tenantId,
          name: t.name,
          serverLimit: Number(t.serverLimit),
          storageQuotaBytes: Number(t.storageQuotaBytes),
          rateLimitRps: t.rateLimitRps,
          rateLimitBurst: t.rateLimitBurst,
          retentionDays: t.retentionDays,
          hotDays: t.hotDays,
          createdAt: iso(t.createdAt, "a tenant's createdAt"),
        })),
        nextPageToken: res.nextPageToken,
      };
    },
  }),
];
