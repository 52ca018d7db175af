import { trustedHeaders } from "../../lib/rpc/context.js";
import { type Command, command } from "../command.js";
import { required, text } from "../flags.js";
import { present } from "../respond.js";

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
];
