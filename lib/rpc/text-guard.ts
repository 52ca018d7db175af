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
 * U+0000 anywhere in a message is INVALID_ARGUMENT before any handler: Postgres cannot store it, and free text
 * the contract has no rule for would answer 500. Other control characters are each field's own rule.
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

/** E.g. `actor.granted_server_ids[1]`. */
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
