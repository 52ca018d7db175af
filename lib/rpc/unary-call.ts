import type { IncomingHttpHeaders } from "node:http";
import { create, type DescMessage, isMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { encodeBinary, encodeCompiled } from "./binary-encoder.js";
import { type CallerExchange, isCallerGone, onCallerGone } from "./http-exchange.js";
import type { UnaryRoute } from "./unary-routes.js";

/** What the lean path runs every call with. */
export type LeanOptions = {
  interceptors: readonly Interceptor[];
  contextValues(req: { headers: IncomingHttpHeaders }): ContextValues;
  readMaxBytes: number;
};

/** What one lean call needs from the request that carried it. */
export type CallInput = {
  route: UnaryRoute;
  protocolName: "connect" | "grpc";
  url: string;
  headers: IncomingHttpHeaders;
  values: ContextValues;
  /** Milliseconds the caller allows (its deadline header), when it set one. */
  timeoutMs: number | undefined;
  /** Subscribes to the caller going away before its answer was written. */
  onCallerGone(listener: () => void): void;
  /** Whether the caller has gone already (reset its stream, dropped its connection). */
  isCallerGone(): boolean;
};

export type CallOutcome =
  | {
      ok: true;
      /** The answer as a message of the output type (built on first use). */
      readonly message: MessageShape<DescMessage>;
      /** The answer in the binary format, from the handler's plain object when nothing needed the message. */
      binary(): Uint8Array;
      header?: Headers;
      trailer?: Headers;
    }
  | { ok: false; error: ConnectError; header?: Headers; trailer?: Headers };

const CALLER_GONE = new ConnectError("the caller went away before its call ran", Code.Canceled);

/** The largest deadline a timer can hold; a longer one is no deadline in practice. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** The CallInput of a request on either protocol, given the deadline its protocol's header set. */
export function callOf(
  route: UnaryRoute,
  protocolName: CallInput["protocolName"],
  req: { url?: string; headers: IncomingHttpHeaders },
  res: CallerExchange,
  timeoutMs: number | undefined,
  options: LeanOptions,
): CallInput {
  return {
    route,
    protocolName,
    url: req.url ?? "",
    headers: req.headers,
    values: options.contextValues(req),
    timeoutMs: timeoutMs !== undefined && timeoutMs <= MAX_TIMEOUT_MS ? timeoutMs : undefined,
    onCallerGone: (listener) => onCallerGone(res, listener),
    isCallerGone: () => isCallerGone(res),
  };
}

/**
 * The HandlerContext of a lean call. What costs something per call (the abort signal and its
 * listener, the Headers objects) is built only when a handler or interceptor asks for it: most
 * handlers read only the context values.
 */
class LazyContext implements HandlerContext {
  readonly method: UnaryRoute["method"];
  readonly service: UnaryRoute["service"];
  readonly requestMethod = "POST";
  readonly protocolName: string;
  readonly url: string;
  readonly values: ContextValues;
  readonly timeoutMs: () => number | undefined;
  private readonly input: CallInput;
  private controller?: AbortController;
  private header?: Headers;
  /** Built only if asked for; read back by the transport after the call. */
  sentHeader?: Headers;
  sentTrailer?: Headers;

  constructor(input: CallInput, deadline: number | undefined) {
    this.input = input;
    this.method = input.route.method;
    this.service = input.route.service;
    this.protocolName = input.protocolName;
    this.url = input.url;
    this.values = input.values;
    this.timeoutMs = deadline === undefined ? () => undefined : () => deadline - Date.now();
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = new AbortController();
      this.controller = controller;
      this.input.onCallerGone(() => controller.abort(new ConnectError("the caller went away", Code.Canceled)));
    }
    return this.controller.signal;
  }

  /** Aborts the signal, if anyone holds it. */
  abort(reason: ConnectError): void {
    this.controller?.abort(reason);
  }

  get requestHeader(): Headers {
    if (!this.header) this.header = toHeaders(this.input.headers);
    return this.header;
  }

  get responseHeader(): Headers {
    this.sentHeader ??= new Headers();
    return this.sentHeader;
  }

  get responseTrailer(): Headers {
    this.sentTrailer ??= new Headers();
    return this.sentTrailer;
  }
}

/** Request headers as a fetch Headers, without HTTP/2 pseudo-headers. */
function toHeaders(raw: IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const name in raw) {
    if (name.startsWith(":")) continue;
    const value = raw[name];
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  return headers;
}

/**
 * The UnaryResponse of a handler's answer. A handler may answer with a plain object; making it a
 * message of the output type (`create`) walks and copies every field of it, a tenth of the servers
 * service's cost for a 20-entry list, only for the binary encoding to walk it again. So the
 * message is built when an interceptor or the JSON encoding reads it; otherwise the plain object
 * is encoded as it is (encodeCompiled writes the bytes `create` then `toBinary` would, and is
 * tested to).
 *
 * Why classes, and not object literals with getters: each evaluation of a literal's `get x()` makes
 * a new getter closure, and V8 keeps it in an accessor pair it allocates in the old generation. A
 * young collection takes every old-to-young pointer as a root until the next full collection, so
 * each call's closure, and through it the call's whole exchange (request, response, buffers), outlived
 * every young collection and was promoted: young collections many times longer in the RPC server,
 * and more CPU per call (docs/performance.md). Getters on a class's prototype are shared and cost nothing per
 * call. The one thing lost: `{ ...res }` copies own fields, not prototype getters; no interceptor of
 * ours copies a unary request or response.
 */
class LazyResponse implements UnaryResponse {
  readonly stream = false;
  readonly service: UnaryRoute["service"];
  readonly method: UnaryRoute["method"];
  private readonly ctx: LazyContext;
  private readonly answer: unknown;
  private built: MessageShape<DescMessage> | undefined;

  constructor(route: UnaryRoute, ctx: LazyContext, answer: unknown) {
    this.service = route.service;
    this.method = route.method;
    this.ctx = ctx;
    this.answer = answer;
    this.built = isMessage(answer, route.method.output) ? answer : undefined;
  }

  get header(): Headers {
    return this.ctx.responseHeader;
  }

  get trailer(): Headers {
    return this.ctx.responseTrailer;
  }

  get message(): MessageShape<DescMessage> {
    this.built ??= create(this.method.output, this.answer as never);
    return this.built;
  }

  set message(message: MessageShape<DescMessage>) {
    this.built = message;
  }

  /** The answer in the binary format while its message is still unbuilt (undefined otherwise). */
  plainBinary(): Uint8Array | undefined {
    if (this.built !== undefined) return undefined;
    try {
      return encodeCompiled(this.method.output, this.answer as never);
    } catch {
      // A value the compiled encoder does not take: the message is built and toBinary decides.
      return undefined;
    }
  }
}

/** The UnaryRequest interceptors see; its signal and header are built on first read (LazyResponse says why a class). */
class LeanRequest implements UnaryRequest {
  readonly stream = false;
  readonly requestMethod = "POST";
  readonly service: UnaryRoute["service"];
  readonly method: UnaryRoute["method"];
  readonly url: string;
  readonly contextValues: ContextValues;
  readonly message: MessageShape<DescMessage>;
  private readonly ctx: LazyContext;

  constructor(input: CallInput, message: MessageShape<DescMessage>, ctx: LazyContext) {
    this.service = input.route.service;
    this.method = input.route.method;
    this.url = input.url;
    this.contextValues = input.values;
    this.message = message;
    this.ctx = ctx;
  }

  get signal(): AbortSignal {
    return this.ctx.signal;
  }

  get header(): Headers {
    return this.ctx.requestHeader;
  }
}

/** A call's answer: the message is read from the response only when the encoding needs it. */
class Answered {
  readonly ok = true;
  readonly header: Headers | undefined;
  readonly trailer: Headers | undefined;
  private readonly res: UnaryResponse;
  private readonly output: DescMessage;

  constructor(res: UnaryResponse, ctx: LazyContext, output: DescMessage) {
    this.res = res;
    this.output = output;
    this.header = ctx.sentHeader;
    this.trailer = ctx.sentTrailer;
  }

  get message(): MessageShape<DescMessage> {
    return this.res.message;
  }

  binary(): Uint8Array {
    const plain = this.res instanceof LazyResponse ? this.res.plainBinary() : undefined;
    return plain ?? encodeBinary(this.output, this.res.message);
  }
}

/**
 * Runs one unary call through the interceptors to the service's handler, as connect-node would:
 * the same UnaryRequest and UnaryResponse shapes, the handler's plain-object answer made a message
 * of the output type, any thrown value made a ConnectError. When the caller's deadline passes
 * first, the outcome is `deadline_exceeded` at once and the handler's signal is aborted; the
 * handler's late answer is dropped.
 */
export function runUnaryCall(
  input: CallInput,
  message: MessageShape<DescMessage>,
  interceptors: readonly Interceptor[],
): Promise<CallOutcome> {
  // A call whose caller already left (a stream reset right after its request, the "rapid reset"
  // pattern) is not run at all: nobody would read its answer.
  if (input.isCallerGone()) return Promise.resolve({ ok: false, error: CALLER_GONE });
  const deadline = input.timeoutMs === undefined ? undefined : Date.now() + input.timeoutMs;
  const ctx = new LazyContext(input, deadline);
  const { route } = input;
  const base = async (req: UnaryRequest): Promise<UnaryResponse> =>
    new LazyResponse(route, ctx, await route.impl(req.message, ctx));
  let next = base as (req: UnaryRequest) => Promise<UnaryResponse>;
  for (let i = interceptors.length - 1; i >= 0; i--) {
    next = (interceptors[i] as Interceptor)(next as never) as typeof next;
  }
  const called = next(new LeanRequest(input, message, ctx) as UnaryRequest).then(
    (res): CallOutcome => new Answered(res, ctx, route.method.output),
    (err: unknown): CallOutcome => ({
      ok: false,
      error: ConnectError.from(err),
      header: ctx.sentHeader,
      trailer: ctx.sentTrailer,
    }),
  );
  if (deadline === undefined) return called;
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      const error = new ConnectError("the call's deadline passed", Code.DeadlineExceeded);
      ctx.abort(error);
      resolve({ ok: false, error });
    }, deadline - Date.now());
    called.then((outcome) => {
      clearTimeout(timer);
      resolve(outcome);
    });
  });
}
