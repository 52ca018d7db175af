import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { IdentityAdminService } from "../gen/replay/identity/v1/admin_pb.js";
import { OutboxService } from "../gen/replay/ops/v1/ops_pb.js";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { RecorderService } from "../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../gen/replay/servers/v1/servers_pb.js";
import { WebhookOpsService } from "../gen/replay/webhooks/v1/webhooks_pb.js";

/** The service clients a command may call; all of them share the one transport to REPLAYCTL_URL. */
export type Clients = {
  admin: Client<typeof IdentityAdminService>;
  servers: Client<typeof ServersService>;
  recorder: Client<typeof RecorderService>;
  recording: Client<typeof RecordingService>;
  outbox: Client<typeof OutboxService>;
  webhookOps: Client<typeof WebhookOpsService>;
};

/** Creates every client replayctl uses on one transport. */
export function createClients(transport: Transport): Clients {
  return {
    admin: createClient(IdentityAdminService, transport),
    servers: createClient(ServersService, transport),
    recorder: createClient(RecorderService, transport),
    recording: createClient(RecordingService, transport),
    outbox: createClient(OutboxService, transport),
    webhookOps: createClient(WebhookOpsService, transport),
  };
}

/** A JSON value as replayctl prints it. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** The one JSON object a command prints on stdout. */
export type Output = Record<string, Json>;

/** One `--flag VALUE`: how usage shows its value, whether it must be given, and its parser. */
export type Flag<T = unknown, R extends boolean = boolean> = {
  hint: string;
  required: R;
  parse: (raw: string, name: string) => T;
};

export type FlagSet = Record<string, Flag>;
type ValueOf<F> = F extends Flag<infer T> ? T : never;
type RequiredKeys<F extends FlagSet> = { [K in keyof F]: F[K] extends Flag<unknown, true> ? K : never }[keyof F];

/** Parsed flag values, keyed by flag name: required flags are always present. */
export type Values<F extends FlagSet> = { [K in RequiredKeys<F>]: ValueOf<F[K]> } & {
  [K in Exclude<keyof F, RequiredKeys<F>>]?: ValueOf<F[K]>;
};

/** One row of the command table: `<noun> <verb>`, its flags, and the call it makes. */
export type Command<F extends FlagSet = FlagSet> = {
  noun: string;
  verb: string;
  flags: F;
  // Flags of which exactly one must be given (member grant's target).
  exactlyOne?: readonly (keyof F & string)[];
  run: (clients: Clients, values: Values<F>) => Promise<Output>;
};

// Each row is typed against its own flags; the table holds them erased, which is sound because
// parseCommandLine only ever hands a row the values parsed from that row's flags.
export function command<F extends FlagSet>(row: Command<F>): Command {
  return row as unknown as Command;
}
