import { type Command, command } from "../command.js";
import { required, text } from "../flags.js";

/** replayctl signing-key … (spec/operations.md §replayctl). */
export const signingKeyCommands: readonly Command[] = [
  command({
    noun: "signing-key",
    verb: "create",
    flags: { tenant: required(text("T")) },
    run: async (c, v) => {
      const res = await c.admin.createSigningKey({ tenantId: v.tenant });
      return { kid: res.kid, secret: res.secret };
    },
  }),
];
