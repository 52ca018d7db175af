import { type ErrorCode, errorCodes } from "../../lib/errors.js";
import { problem } from "../../lib/problem.js";
import { WEBHOOK_EVENTS } from "../../lib/vocabulary.js";
import { isRateLimited, type Route } from "../routes/route.js";
import { type JsonSchema, schemas, webhookEventSchemaName } from "./schemas.js";

// The OpenAPI 3.1 document of the public surface, built from the gateway's route table: every route
// is in it because every route must carry a `doc`, and nothing is in it that the table lacks.

/** Codes every route can answer whatever it does. */
const EVERY_ROUTE: readonly ErrorCode[] = [
  "INVALID_BODY",
  "PAYLOAD_TOO_LARGE",
  "INTERNAL_ERROR",
  "SERVICE_UNAVAILABLE",
];
/** Codes of each authentication scheme, in the order its checks run (decisions.md §2, §3). */
const API_KEY: readonly ErrorCode[] = ["UNAUTHENTICATED", "INVALID_API_KEY"];
const SIGNATURE: readonly ErrorCode[] = [
  "UNAUTHENTICATED",
  "MISSING_TENANT",
  "INVALID_SIGNATURE",
  "REQUEST_EXPIRED",
  "NONCE_REUSED",
];

const SIGNING = `Routes under \`/v1/replays\` and \`/v1/webhooks\` (but the delivery replay) are signed with the tenant's signing key:

\`\`\`
Authorization: FV1-HMAC-SHA256 tenant=<tenant_uuid>,ts=<unix_ms>,nonce=<nonce>,kid=<key_id>,sig=<hex>
\`\`\`

\`sig\` is the lowercase hex HMAC-SHA256, keyed with the signing key's secret, of nine lines joined by \`\\n\` (no trailing newline):

\`\`\`
FV1-HMAC-SHA256
<tenant>
<ts>
<nonce>
<kid>
<HTTP method, upper case>
<path exactly as sent, without the query>
<query: pairs percent-decoded (+ stays a plus), re-encoded per RFC 3986, sorted by name then value, joined by &; empty if none>
<lowercase hex SHA-256 of the raw body bytes (of the empty string when there is no body)>
\`\`\`

\`ts\` must be within 300 s of the server's clock; \`nonce\` is 16 to 64 of \`[A-Za-z0-9_-]\` and is never accepted twice for one \`kid\`. Failures are 401: \`UNAUTHENTICATED\` (no header or another scheme), \`MISSING_TENANT\`, \`INVALID_SIGNATURE\`, \`REQUEST_EXPIRED\`, \`NONCE_REUSED\`, checked in that order.`;

const DESCRIPTION = `The developer API of the replay service: timeline markers, servers management, replays and webhooks.

Every error is an RFC 9457 \`application/problem+json\` body whose \`code\` is stable; validation failures add \`errors[]\`, one entry per field. Every response carries \`X-Request-Id\` (yours when you send a valid one). Unset optional fields are \`null\`; timestamps are RFC 3339 UTC with milliseconds. Bodies are at most 65 536 bytes. An unknown path is 404 \`NOT_FOUND\`, a known path with another method 405 \`METHOD_NOT_ALLOWED\` with \`Allow\`.

## Authentication

- **API key** (\`/v1/api/*\` and the delivery replay): \`Authorization: Bearer svc_live_…\`. Each route needs one scope; a missing scope is 403 \`INSUFFICIENT_SCOPE\`. Requests to \`/v1/api/*\` share a per-tenant rate limit (429 \`RATE_LIMITED\` with \`Retry-After\`, and \`RateLimit\` headers on every answer).
- **Request signing** (\`/v1/replays\`, \`/v1/webhooks\`), below.

## Request signing

${SIGNING}`;

/** The document for these routes, deterministic: the same table gives the same bytes. */
export function openApiDocument(routes: readonly Route[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z]+)/g, "{$1}");
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Replay service API",
      version: "1.0.0",
      description: DESCRIPTION,
      license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
    },
    servers: [{ url: "/", description: "This gateway" }],
    tags: [
      { name: "Timeline markers", description: "Labelled moments pinned to a replay's timeline." },
      { name: "Servers", description: "Connected servers and pending setups." },
      { name: "Replays", description: "Replay metadata: list, get, delete." },
      {
        name: "Webhook subscriptions",
        description: "Subscriptions, the delivery log and manual replay; the events themselves are under Webhooks.",
      },
    ],
    paths,
    webhooks: Object.fromEntries(WEBHOOK_EVENTS.map((event) => [event, webhookOperation(event)])),
    components: {
      schemas,
      examples: problemExamples(routes),
      securitySchemes: {
        apiKey: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "svc_live_ + 40 base62 characters",
          description: "A developer API key, minted with scopes; some are bound to the member who minted them.",
        },
        signature: {
          type: "apiKey",
          in: "header",
          name: "Authorization",
          description: SIGNING,
        },
      },
    },
  };
}

function operation(route: Route): Record<string, unknown> {
  const { doc } = route;
  const parameters: Record<string, unknown>[] = [];
  for (const [name, description] of Object.entries(doc.pathParams ?? {})) {
    parameters.push({ name, in: "path", required: true, description, schema: { type: "string", format: "uuid" } });
  }
  for (const p of doc.query ?? [])
    parameters.push({ name: p.name, in: "query", description: p.description, schema: p.schema });
  for (const p of doc.headers ?? [])
    parameters.push({ name: p.name, in: "header", description: p.description, schema: p.schema });
  const codes = [
    ...(route.auth === "api-key" ? API_KEY : SIGNATURE),
    ...(isRateLimited(route) ? (["RATE_LIMITED"] as const) : []),
    ...(route.scope ? (["INSUFFICIENT_SCOPE"] as const) : []),
    ...doc.errors,
    ...EVERY_ROUTE,
  ];
  const responses: Record<string, unknown> = {
    [doc.success.status]: {
      description: doc.success.description,
      ...(doc.success.schema
        ? { content: { "application/json": { schema: { $ref: `#/components/schemas/${doc.success.schema}` } } } }
        : {}),
    },
  };
  for (const [status, statusCodes] of byStatus(codes)) {
    responses[status] = problemResponse(statusCodes);
  }
  const scopeNote = route.scope ? ` Scope: \`${route.scope}\`.` : "";
  return {
    operationId: doc.operationId,
    tags: [doc.tag],
    summary: doc.summary,
    description: `${doc.description ?? ""}${scopeNote}`.trim() || undefined,
    security: [route.auth === "api-key" ? { apiKey: route.scope ? [route.scope] : [] } : { signature: [] }],
    ...(route.scope ? { "x-scope": route.scope } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(doc.requestBody
      ? {
          requestBody: {
            required: !doc.requestBodyOptional,
            content: { "application/json": { schema: { $ref: `#/components/schemas/${doc.requestBody}` } } },
          },
        }
      : {}),
    responses,
  };
}

/** The codes by HTTP status, each status's codes in the order given, no repeats. */
function byStatus(codes: readonly ErrorCode[]): [string, ErrorCode[]][] {
  const groups = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = errorCodes[code].status;
    const group = groups.get(status) ?? [];
    if (!group.includes(code)) group.push(code);
    groups.set(status, group);
  }
  return [...groups].sort(([a], [b]) => a - b).map(([status, group]) => [String(status), group]);
}

/** A problem answer naming its codes, with the example body of each (components.examples). */
function problemResponse(codes: readonly ErrorCode[]): Record<string, unknown> {
  const schema: JsonSchema = {
    allOf: [{ $ref: "#/components/schemas/Problem" }, { properties: { code: { enum: codes } } }],
  };
  return {
    description: codes.map((code) => `\`${code}\``).join(", "),
    content: {
      "application/problem+json": {
        schema,
        examples: Object.fromEntries(codes.map((code) => [code, { $ref: `#/components/examples/${code}` }])),
      },
    },
  };
}

/** One example problem per code that some route answers with. */
function problemExamples(routes: readonly Route[]): Record<string, unknown> {
  const codes = new Set<ErrorCode>([...API_KEY, ...SIGNATURE, "RATE_LIMITED", "INSUFFICIENT_SCOPE", ...EVERY_ROUTE]);
  for (const route of routes) for (const code of route.doc.errors) codes.add(code);
  return Object.fromEntries(
    [...codes].sort().map((code) => [
      code,
      {
        summary: code,
        value: {
          ...problem(code, code.toLowerCase().replaceAll("_", " ")),
          instance: "5f2b8c1e-0c1a-4f7e-9d9e-0e4b7b1c2d3a",
        },
      },
    ]),
  );
}

function webhookOperation(event: (typeof WEBHOOK_EVENTS)[number]): Record<string, unknown> {
  return {
    post: {
      summary: event,
      description:
        "Sent to each subscription naming this event. Verify `X-FV-Signature` before parsing the body: `sha256=` + hex HMAC-SHA256 of `<X-FV-Timestamp>.<raw body>`, keyed with the subscription's secret, compared in constant time. Answer 2xx within 15 s; anything else is retried (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h); 410 stops. Be idempotent on `event_id`.",
      parameters: [
        { name: "X-FV-Event", in: "header", required: true, schema: { type: "string", const: event } },
        { name: "X-FV-Event-Id", in: "header", required: true, schema: { type: "string", format: "uuid" } },
        {
          name: "X-FV-Timestamp",
          in: "header",
          required: true,
          description: "Unix seconds of this attempt.",
          schema: { type: "string", pattern: "^[0-9]+$" },
        },
        {
          name: "X-FV-Signature",
          in: "header",
          required: true,
          schema: { type: "string", pattern: "^sha256=[0-9a-f]{64}$" },
        },
      ],
      requestBody: {
        required: true,
        content: { "application/json": { schema: { $ref: `#/components/schemas/${webhookEventSchemaName(event)}` } } },
      },
      responses: {
        "200": { description: "Any 2xx: delivered." },
        "410": { description: "Gone: no further attempt of this delivery." },
      },
    },
  };
}
