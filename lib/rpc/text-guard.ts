import { type DescField, type DescMessage, type MessageShape, ScalarType } from "@bufbuild/protobuf";
import {
  isReflectMessage,
  type ReflectList,
  type ReflectMap,
  type ReflectMessage,
  reflect,
} from "@bufbuild/protobuf/reflect";
import type { Interceptor } from "@connectrpc/connect";
import { DomainError } from "../errors.js";
import { hasNul } from "../text.js";

/**
 * Refuses, before any handler, a request whose message holds a string with U+0000 anywhere (a
 * field, a list element, a map key or value, at any depth), as INVALID_ARGUMENT naming the field.
 * Postgres cannot store U+0000 in text, so without this such a value answered 500 ("invalid byte
 * sequence 0x00") from whatever handler wrote it. It is generic on purpose: the services take free
 * text the contract gives no rule for (a recorder's plugin version, a tenant's name), and NUL is
 * refused in all of it. The other control characters are a per-field rule, left to each field's
 * own parser (server and category names: INVALID_NAME, decisions.md §1). The gateway keeps the
 * public API's own codes by never forwarding a NUL (gateway/routes/json.ts).
 */
export const textGuard: Interceptor = (next) => async (req) => {
  if (!req.stream) {
    refuseNul(req.method.input, req.message);
    return next(req);
  }
  const input = req.method.input;
  const messages = req.message;
  return next({
    ...req,
    message: (async function* () {
      for await (const message of messages) {
        refuseNul(input, message);
        yield message;
      }
    })(),
  });
};

/** The path of the first string in `message` that holds U+0000 (`actor.granted_server_ids[1]`), or undefined. */
export function nulPath<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): string | undefined {
  return nulField(reflect(schema, message), "");
}

function refuseNul<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): void {
  const field = nulPath(schema, message);
  if (field === undefined) return;
  const detail = `${field} must not contain U+0000`;
  throw new DomainError("INVALID_ARGUMENT", detail, [{ field, code: "INVALID_ARGUMENT", detail }]);
}

function nulField(message: ReflectMessage, prefix: string): string | undefined {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const path = prefix + field.name;
    const found = nulIn(field, message.get(field), path);
    if (found !== undefined) return found;
  }
  return undefined;
}

function nulIn(field: DescField, value: unknown, path: string): string | undefined {
  switch (field.fieldKind) {
    case "scalar":
      return field.scalar === ScalarType.STRING && hasNul(value as string) ? path : undefined;
    case "message":
      return nulField(value as ReflectMessage, `${path}.`);
    case "enum":
      return undefined;
    case "list":
      for (const [index, element] of (value as ReflectList).entries()) {
        const at = `${path}[${index}]`;
        if (isReflectMessage(element)) {
          const found = nulField(element, `${at}.`);
          if (found !== undefined) return found;
        } else if (typeof element === "string" && hasNul(element)) return at;
      }
      return undefined;
    case "map":
      for (const [key, element] of value as ReflectMap) {
        const at = `${path}[${JSON.stringify(String(key))}]`;
        if (typeof key === "string" && hasNul(key)) return at;
        if (isReflectMessage(element)) {
          const found = nulField(element, `${at}.`);
          if (found !== undefined) return found;
        } else if (typeof element === "string" && hasNul(element)) return at;
      }
      return undefined;
  }
}
