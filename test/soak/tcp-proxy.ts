import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A loopback TCP proxy with faults, standing where a network sits in Kubernetes: in front of a
 * service's replicas it is the Service (round-robin per connection, as kube-proxy balances), in
 * front of Postgres or NATS it is one process's link, which the soak can slow, blackhole or cut.
 * It knows nothing of the protocols it carries.
 */
export type TcpProxy = {
  port: number;
  name: string;
  /** Adds `ms` to every chunk in both directions (order kept); 0 removes it. */
  delay(ms: number): void;
  /** Keeps accepting and holding connections but passes no bytes until `heal` (then what was held flows). */
  blackhole(): void;
  /** Destroys every open connection now; new ones are accepted as before. */
  cut(): void;
  /** No delay, no blackhole. */
  heal(): void;
  /** How many connections are open now. */
  open(): number;
  close(): Promise<void>;
};

type Direction = { queue: { at: number; chunk: Buffer }[]; timer: NodeJS.Timeout | undefined };

/** Holding more than this per direction pauses the sender, as a full TCP window would. */
const HIGH_WATER_BYTES = 1 << 20;

export async function startTcpProxy(options: {
  name: string;
  port: number;
  upstreams: readonly { host: string; port: number }[];
}): Promise<TcpProxy> {
  let delayMs = 0;
  let holding = false;
  let next = 0;
  const pumps = new Set<() => void>();
  const sockets = new Set<Socket>();

  // One direction of one connection: chunks wait for their time (and for the blackhole to lift).
  const relay = (from: Socket, to: Socket) => {
    const dir: Direction = { queue: [], timer: undefined };
    let held = 0;
    const pump = () => {
      if (dir.timer) clearTimeout(dir.timer);
      dir.timer = undefined;
      while (!holding && dir.queue.length > 0 && !to.destroyed) {
        const head = dir.queue[0] as Direction["queue"][number];
        const wait = head.at - Date.now();
        if (wait > 0) {
          dir.timer = setTimeout(pump, wait);
          return;
        }
        dir.queue.shift();
        held -= head.chunk.length;
        to.write(head.chunk);
      }
      if (held < HIGH_WATER_BYTES && from.isPaused()) from.resume();
    };
    pumps.add(pump);
    from.on("data", (chunk: Buffer) => {
      const last = dir.queue.at(-1)?.at ?? 0;
      dir.queue.push({ at: Math.max(last, Date.now() + delayMs), chunk });
      held += chunk.length;
      if (held >= HIGH_WATER_BYTES) from.pause();
      if (!dir.timer) pump();
    });
    // An end is passed on only once what came before it has been written.
    from.on("end", () => {
      const finish = () => (dir.queue.length === 0 ? to.end() : setTimeout(finish, 5));
      finish();
    });
    from.on("close", () => {
      pumps.delete(pump);
      if (dir.timer) clearTimeout(dir.timer);
    });
  };

  // A replica that refuses (killed) is skipped for the next one, as endpoints drop out of a Service.
  const dial = (client: Socket, tries: number): void => {
    if (tries >= options.upstreams.length) {
      client.destroy();
      return;
    }
    const target = options.upstreams[next++ % options.upstreams.length] as { host: string; port: number };
    const upstream = connect(target);
    const onError = () => {
      upstream.destroy();
      if (!client.destroyed) dial(client, tries + 1);
    };
    upstream.once("error", onError);
    upstream.once("connect", () => {
      upstream.off("error", onError);
      sockets.add(upstream);
      upstream.setNoDelay(true);
      relay(client, upstream);
      relay(upstream, client);
      client.resume();
      const both = () => {
        client.destroy();
        upstream.destroy();
      };
      upstream.on("error", both);
      client.on("error", both);
      upstream.on("close", both);
      client.on("close", both);
      upstream.once("close", () => sockets.delete(upstream));
    });
  };

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.setNoDelay(true);
    client.once("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    dial(client, 0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: "127.0.0.1", exclusive: true }, resolve);
  });
  const flushAll = () => {
    for (const pump of pumps) pump();
  };
  return {
    port: options.port,
    name: options.name,
    delay(ms) {
      delayMs = ms;
    },
    blackhole() {
      holding = true;
    },
    cut() {
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      delayMs = 0;
      holding = false;
      flushAll();
    },
    open: () => sockets.size,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
