import { type Command, command } from "../command.js";
import { list, pageFlags, pageOf, required, text } from "../flags.js";
import { iso, isoOrNull } from "../respond.js";

/** replayctl key … (spec/operations.md §replayctl). */
export const keyCommands: readonly Command[] = [
  command({
    noun: "key",
    verb: "create",
    flags: { tenant: required(text("T")), scopes: required(list("a,b,c")), member: text("M") },
    run: async (c, v) => {
      // No --member mints a key from before member binding (empty member_id).
      const res = await c.admin.createApiKey({ tenantId: v.tenant, scopes: v.scopes, memberId: v.member ?? "" });
      return { keyId: res.keyId, key: res.key };
    },
  }),
  command({
    noun: "key",
    verb: "revoke",
    flags: { "key-id": required(text("K")) },
    run: async (c, v) => {
      const res = await c.admin.revokeApiKey({ keyId: v["key-id"] });
      return { keyId: res.keyId };
    },
  }),
  command({
    noun: "key",
    verb: "list",
    flags: { tenant: required(text("T")), ...pageFlags },
    run: async (c, v) => {
      // The service never returns a key or its hash; only what identifies and describes it.
      const res = await c.admin.listApiKeys({ tenantId: v.tenant, ...pageOf(v) });
      return {
        keys: res.keys.map((k) => ({
          keyId: k.keyId,
          scopes: k.scopes,
          memberId: k.memberId === "" ? null : k.memberId,
          createdAt: iso(k.createdAt, "a key's createdAt"),
          revokedAt: isoOrNull(k.revokedAt),
        })),
        nextPageToken: res.nextPageToken,
      };
    },
  }),
];
