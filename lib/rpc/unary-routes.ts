import type { DescMethodUnary, DescService } from "@bufbuild/protobuf";
import { type ConnectRouter, createServiceImplSpec, type HandlerContext } from "@connectrpc/connect";

export type UnaryRoute = {
  readonly service: DescService;
  readonly method: DescMethodUnary;
  readonly impl: (request: unknown, context: HandlerContext) => unknown;
};

/** Also keeps every unary handler by request path, so the lean path calls the very same functions. */
export function collectUnaryRoutes(
  router: ConnectRouter,
  routes: (router: ConnectRouter) => void,
): ReadonlyMap<string, UnaryRoute> {
  const found = new Map<string, UnaryRoute>();
  const recording: ConnectRouter = {
    get handlers() {
      return router.handlers;
    },
    service(service, implementation, options) {
      router.service(service, implementation, options);
      const spec = createServiceImplSpec(service, implementation);
      for (const method of service.methods) {
        const entry = spec.methods[method.localName];
        if (method.methodKind !== "unary" || entry?.kind !== "unary") continue;
        found.set(`/${service.typeName}/${method.name}`, {
          service,
          method: method as DescMethodUnary,
          impl: entry.impl as UnaryRoute["impl"],
        });
      }
      return recording;
    },
    rpc(method, impl, options) {
      router.rpc(method, impl, options);
      if (method.methodKind === "unary") {
        found.set(`/${method.parent.typeName}/${method.name}`, {
          service: method.parent,
          method: method as DescMethodUnary,
          impl: impl as UnaryRoute["impl"],
        });
      }
      return recording;
    },
  };
  routes(recording);
  return found;
}
