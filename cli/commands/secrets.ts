import { type Command, command } from "../command.js";

/** replayctl secrets … (docs/operations.md: rotating SECRETS_KEY). */
export const secretsCommands: readonly Command[] = [
  command({
    noun: "secrets",
    verb: "reencrypt",
    flags: {},
    run: async (c) => {
      const res = await c.admin.reencryptSecrets({});
      const of = (field: "resealed" | "unreadable") =>
        Object.fromEntries(res.stores.map((s) => [s.store, Number(s[field])]));
      return { resealed: of("resealed"), unreadable: of("unreadable") };
    },
  }),
];
