import { trustedHeaders } from "../../lib/rpc/context.js";
import { type Command, command } from "../command.js";
import { pageFlags, pageOf, required, text } from "../flags.js";
import { iso, present } from "../respond.js";

/** replayctl category … (spec/operations.md §replayctl). */
export const categoryCommands: readonly Command[] = [
  command({
    noun: "category",
    verb: "create",
    flags: { tenant: required(text("T")), name: required(text("N")) },
    run: async (c, v) => {
      // ServersService takes its tenant from the trusted context, as when the gateway calls it.
      const res = await c.servers.createCategory({ name: v.name }, { headers: trustedHeaders({ tenantId: v.tenant }) });
      return { categoryId: present(res.category, "a category").categoryId };
    },
  }),
  command({
    noun: "category",
    verb: "list",
    flags: { tenant: required(text("T")), ...pageFlags },
    run: async (c, v) => {
      // Through the admin API, which checks the tenant exists before asking the servers service.
      const res = await c.admin.listCategories({ tenantId: v.tenant, ...pageOf(v) });
      return {
        categories: res.categories.map((cat) => ({
          categoryId: cat.categoryId,
          name: cat.name,
          createdAt: iso(cat.createdAt, "a category's createdAt"),
        })),
        nextPageToken: res.nextPageToken,
      };
    },
  }),
];
