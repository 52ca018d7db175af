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

export type LeanOptions = {
  interceptors: readonly Interceptor[];
  contextValues(req: { headers: IncomingHttpHeaders }): ContextValues;
  readMaxBytes: number;
};

export type CallInput = {
  route: UnaryRoute;
  protocolName: "connect" | "grpc";
  url: string;
  headers: IncomingHttpHeaders;
  values: ContextValues;
  /** From the caller's deadline header. */
  timeoutMs: number | undefined;
  onCallerGone(listener: () => void): void;
  isCallerGone(): boolean;
};

export type CallOutcome =
  | {
      ok: true;
      /** Built on first use. */
      readonly message: MessageShape<DescMessage>;
      /** From the handler's plain object when nothing needed the message. */
      binary(): Uint8Array;
      header?: Headers;
      trailer?: Headers;
    }
  | { ok: false; error: ConnectError; header?: Headers; trailer?: Headers };

const CALLER_GONE = new ConnectError("the caller went away before its call ran", Code.Canceled);

/** The largest deadline a timer can hold; a longer one is no deadline in practice. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

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

/** The signal and the Headers are built only when asked for: most handlers read only the context values. */
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
 * The message is built only when an interceptor or JSON reads it; otherwise the plain answer is encoded
 * as it is (encodeCompiled writes the bytes `create` + `toBinary` would, tested). A class, not a literal
 * with getters (docs/engineering.md); `{ ...res }` then copies no getters, and no interceptor of ours copies.
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
 * Runs one unary call through the interceptors to the handler as connect-node would. When the caller's
 * deadline passes first, the outcome is `deadline_exceeded` at once, the handler's signal aborts and its
 * late answer is dropped.
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
