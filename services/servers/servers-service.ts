import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Actor } from "../../gen/replay/common/v1/common_pb.js";
import {
  type Category,
  type PendingSetup,
  type Server,
  ServerState,
  ServerStatus,
  type ServersService,
} from "../../gen/replay/servers/v1/servers_pb.js";
import { buildEvent } from "../../lib/bus/events.js";
import type { Db, Tx } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { newId } from "../../lib/ids.js";
import { keysetAfter, keysetPage } from "../../lib/page/keyset.js";
import { pageSizeOf } from "../../lib/page/size.js";
import type { LookupPlan } from "../../lib/plan-owner.js";
import { actorOf, requireTenant, traceOf } from "../../lib/rpc/context.js";
import type { TraceContext } from "../../lib/trace.js";
import { canSeeSource, requireAccess, requireManager } from "./access.js";
import { parseName } from "./name.js";
import { parseServerId, parseSetupInput } from "./setup.js";
import { isOnline } from "./status.js";
import type { CategoryRow, ServerRow } from "./store.js";
import * as store from "./store.js";

export type ServersDeps = {
  db: Db;
  now: () => Date;
  lookupPlan: LookupPlan;
};

export function toServerMessage(row: ServerRow, now: Date): Omit<Server, "$typeName"> {
  return {
    serverId: row.server_id,
    name: row.name,
    status: isOnline(row.state, row.last_seen_at, now) ? ServerStatus.ONLINE : ServerStatus.OFFLINE,
    lastSeenAt: row.last_seen_at ? timestampFromDate(row.last_seen_at) : undefined,
    pluginVersion: row.plugin_version ?? undefined,
    replayCount: BigInt(row.replay_count),
    categoryId: row.category_id ?? "",
    state: row.state === "deauthorised" ? ServerState.DEAUTHORISED : ServerState.CONNECTED,
  };
}

function toPendingMessage(row: ServerRow, showSource: boolean): Omit<PendingSetup, "$typeName"> {
  return {
    serverId: row.server_id,
    name: row.name,
    categoryId: row.category_id ?? "",
    createdAt: timestampFromDate(row.created_at),
    sourceServerId: showSource ? (row.source_server_id ?? "") : "",
  };
}

function toCategoryMessage(row: CategoryRow): Omit<Category, "$typeName"> {
  return { categoryId: row.category_id, name: row.name, createdAt: timestampFromDate(row.created_at) };
}

const notFound = (serverId: string) => new DomainError("SERVER_NOT_FOUND", `no server ${serverId}`);

/**
 * Servers management (decisions.md §4). Writes check, in order: well formed (400), the member's rights (403),
 * the target exists (404; a setup's id on a server route too), may manage it (403), the plan limit (409).
 */
export function createServersService(deps: ServersDeps): ServiceImpl<typeof ServersService> {
  const { db } = deps;

  type Target = { tenantId: string; serverId: string; actor: Actor; trace: TraceContext | undefined };

  function target(ctx: HandlerContext, rawId: string): Target {
    const tenantId = requireTenant(ctx);
    const serverId = parseServerId(rawId);
    return { tenantId, serverId, actor: requireManager(actorOf(ctx)), trace: traceOf(ctx) };
  }

  /** Locked; of the kind the route addresses, else SERVER_NOT_FOUND; then the member must manage it. */
  async function lockManageable(
    tx: Tx,
    { tenantId, serverId, actor }: Target,
    kind: "server" | "pending",
  ): Promise<ServerRow> {
    const row = await store.findServerById(tx, tenantId, serverId, true);
    if (!row || (row.state === "pending") !== (kind === "pending")) throw notFound(serverId);
    requireAccess(actor, { serverId, categoryId: row.category_id });
    return row;
  }

  /** Purge and cancel free the slot at once. */
  async function removeServer(to: Target, kind: "server" | "pending"): Promise<void> {
    await db.transaction(
      async (tx) => {
        await lockManageable(tx, to, kind);
        await store.deleteServer(tx, to.serverId);
        await store.enqueueEvent(
          tx,
          buildEvent("servers.server.purged", { tenantId: to.tenantId, serverId: to.serverId }),
        );
      },
      { trace: to.trace },
    );
  }

  // A tenant created a moment ago may not be projected yet: its owner is asked (versions only rise).
  async function knowPlan(tenantId: string, signal: AbortSignal): Promise<void> {
    if (await store.findTenantPlan(db, tenantId)) return;
    const plan = await deps.lookupPlan(tenantId, signal);
    if (!plan) throw new DomainError("SERVICE_UNAVAILABLE", "the tenant's plan is not known; retry");
    await db.transaction((tx) =>
      store.upsertTenantPlan(tx, { tenantId, serverLimit: Number(plan.serverLimit), version: Number(plan.version) }),
    );
  }

  return {
    async listServers(_req, ctx) {
      const tenantId = requireTenant(ctx);
      const now = deps.now();
      return { servers: (await store.listServersByTenant(db, tenantId)).map((row) => toServerMessage(row, now)) };
    },

    async listPendingSetups(_req, ctx) {
      const tenantId = requireTenant(ctx);
      const showSource = canSeeSource(actorOf(ctx));
      return {
        pending: (await store.listPendingByTenant(db, tenantId)).map((row) => toPendingMessage(row, showSource)),
      };
    },

    async createPendingSetup(req, ctx) {
      const tenantId = requireTenant(ctx);
      const input = parseSetupInput(req);
      const actor = requireManager(actorOf(ctx));
      const category =
        input.categoryId === null ? undefined : await store.findCategoryById(db, tenantId, input.categoryId);
      if (input.categoryId !== null && !category)
        throw new DomainError("CATEGORY_NOT_FOUND", `no category ${input.categoryId}`);
      let categoryId = input.categoryId;
      if (input.sourceServerId !== null) {
        const source = await store.findServerById(db, tenantId, input.sourceServerId);
        if (!source || source.state === "pending") throw notFound(input.sourceServerId);
        requireAccess(actor, { serverId: source.server_id, categoryId: source.category_id });
        // decisions.md §4: the copy takes the source's category unless one is named.
        categoryId ??= source.category_id;
      }
      requireAccess(actor, { categoryId });
      await knowPlan(tenantId, ctx.signal);
      const row = await db.transaction(
        async (tx) => {
          const plan = await store.findTenantPlan(tx, tenantId, true);
          const used = await store.countSlotsByTenant(tx, tenantId);
          if (!plan || used >= plan.server_limit) {
            throw new DomainError(
              "SERVER_LIMIT_REACHED",
              `the plan's server limit of ${plan?.server_limit ?? 0} is reached`,
            );
          }
          const serverId = newId();
          const inserted = await store.insertServer(tx, {
            serverId,
            tenantId,
            name: input.name,
            categoryId,
            sourceServerId: input.sourceServerId,
          });
          await store.enqueueEvent(
            tx,
            buildEvent("servers.server.created", { tenantId, serverId, categoryId: categoryId ?? "" }),
          );
          return inserted;
        },
        { trace: traceOf(ctx) },
      );
      return { setup: toPendingMessage(row, canSeeSource(actor)) };
    },

    async renameServer(req, ctx) {
      const tenantId = requireTenant(ctx);
      const serverId = parseServerId(req.serverId);
      // decisions.md §4: a malformed name (400) answers before the member checks (403).
      const name = parseName(req.name, req.malformedFields.includes("name"));
      const to: Target = { tenantId, serverId, actor: requireManager(actorOf(ctx)), trace: traceOf(ctx) };
      const row = await db.transaction(async (tx) => {
        await lockManageable(tx, to, "server");
        await store.updateServerName(tx, serverId, name);
        return (await store.findServerById(tx, tenantId, serverId)) as ServerRow;
      });
      return { server: toServerMessage(row, deps.now()) };
    },

    async deauthoriseServer(req, ctx) {
      const to = target(ctx, req.serverId);
      await db.transaction(
        async (tx) => {
          const row = await lockManageable(tx, to, "server");
          // decisions.md §4: deauthorising a deauthorised server is 204 and changes nothing.
          if (row.state !== "connected") return;
          await store.updateServerDeauthorised(tx, row.server_id);
          await store.enqueueEvent(
            tx,
            buildEvent("servers.server.deauthorised", { tenantId: to.tenantId, serverId: to.serverId }),
          );
        },
        { trace: to.trace },
      );
      return {};
    },

    async purgeServer(req, ctx) {
      await removeServer(target(ctx, req.serverId), "server");
      return {};
    },

    async cancelPendingSetup(req, ctx) {
      await removeServer(target(ctx, req.serverId), "pending");
      return {};
    },

    async createCategory(req, ctx) {
      const tenantId = requireTenant(ctx);
      const row = await store.insertCategory(db, { categoryId: newId(), tenantId, name: parseName(req.name) });
      return { category: toCategoryMessage(row) };
    },

    async listCategories(req, ctx) {
      const tenantId = requireTenant(ctx);
      const pageSize = pageSizeOf(req.pageSize);
      const after = keysetAfter(req.pageToken);
      const rows = await store.listCategoriesByTenant(db, tenantId, { after, limit: pageSize + 1 });
      const page = keysetPage(rows, pageSize, after, (row) => row.category_id);
      return { categories: page.rows.map(toCategoryMessage), nextPageToken: page.nextPageToken };
    },

    async getSlotUsage(_req, ctx) {
      const tenantId = requireTenant(ctx);
      const [used, plan] = await Promise.all([
        store.countSlotsByTenant(db, tenantId),
        store.findTenantPlan(db, tenantId),
      ]);
      return { serversUsed: BigInt(used), serverLimit: BigInt(plan?.server_limit ?? 0) };
    },
  };
}
