import { type Behaviour, startWebhookReceiver } from "../webhook-receiver.js";
import type { Rng } from "./rng.js";

/**
 * The soak's webhook receiver: test/webhook-receiver.ts answering like a flaky real one, seeded:
 * 500 to `failRate` of requests, a stall (held past the sender's timeout, then closed) to
 * `stallRate`, 200 otherwise. Every request is kept with what it was answered.
 */
export type ReceivedDelivery = {
  /** The receiver path, one per subscription. */
  path: string;
  eventId: string;
  event: string;
  /** What the receiver answered; 0 for a stall (the sender never got an answer). */
  status: number;
  atMs: number;
};

export type SoakReceiver = {
  port: number;
  /** A path for a new subscription, answered with the flaky behaviour. */
  newSubscriptionUrl(): { path: string; url: string };
  deliveries(): ReceivedDelivery[];
  close(): Promise<void>;
};

export async function startSoakReceiver(options: {
  port: number;
  certDir: string;
  rng: Rng;
  failRate: number;
  stallRate: number;
  stallMs: number;
}): Promise<SoakReceiver> {
  const receiver = await startWebhookReceiver({ port: options.port, certDir: options.certDir });
  const answers = new Map<string, number[]>();
  return {
    port: receiver.port,
    newSubscriptionUrl() {
      const path = receiver.newPath();
      const statuses: number[] = [];
      answers.set(path, statuses);
      // Called once per request of the path, in arrival order: the index is the request's.
      receiver.behave(path, (index): Behaviour => {
        const roll = options.rng.next();
        const b: Behaviour =
          roll < options.stallRate
            ? { hang: true, closeAfterMs: options.stallMs }
            : roll < options.stallRate + options.failRate
              ? { status: 500 }
              : { status: 200 };
        statuses[index] = b.hang ? 0 : (b.status as number);
        return b;
      });
      return { path, url: receiver.url(path) };
    },
    deliveries() {
      const out: ReceivedDelivery[] = [];
      for (const [path, statuses] of answers) {
        receiver.requests(path).forEach((r, i) => {
          out.push({
            path,
            eventId: String(r.headers["x-fv-event-id"] ?? ""),
            event: String(r.headers["x-fv-event"] ?? ""),
            status: statuses[i] ?? -1,
            atMs: r.at,
          });
        });
      }
      return out;
    },
    close: () => receiver.close(),
  };
}
