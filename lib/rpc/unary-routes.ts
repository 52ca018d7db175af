import type { DescMethodUnary, DescService } from "@bufbuild/protobuf";
import { type ConnectRouter, createServiceImplSpec, type HandlerContext } from "@connectrpc/connect";

/** One unary RPC the lean path serves: its descriptors and the service's own handler, bound. */
export type UnaryRoute = {
  readonly service: DescService;
  readonly method: DescMethodUnary;
  readonly impl: (request: unknown, context: HandlerContext) => unknown;
};

/**
 * Registers routes on connect-node's router as usual, and also keeps every unary handler by its
 * request path (`/<package.Service>/<Method>`), so that the lean path can call the very same
 * `ServiceImpl` functions. Methods a service leaves out are answered `unimplemented` by
 * createServiceImplSpec's stub, as connect-node would.
 */
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
