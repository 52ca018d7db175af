import { createRequire } from "node:module";
import { type DestinationStream, type Logger, pino } from "pino";

/** Paths never written to a log: credentials and signatures (STYLE.md §9). */
const redact = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-fv-signature"]',
  "headers.authorization",
  "secret",
];

/** JSON lines for collectors; a terminal gets pino-pretty, loaded only then. */
function destination(): DestinationStream | undefined {
  if (!process.stdout.isTTY) return undefined;
  const pretty = createRequire(import.meta.url)("pino-pretty") as (options: object) => DestinationStream;
  return pretty({ colorize: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname", sync: true });
}

const root: Logger = pino({ level: "info", redact, base: undefined }, destination());
const children = new Set<Logger>();

/** start.ts calls it once from config. */
export function configureLogging(level: string): void {
  root.level = level;
  for (const child of children) child.level = level;
}

/** A child logger for one module, named "<area>:<module>"; declare it once per module. */
export function logger(name: string): Logger {
  const child = root.child({ name });
  children.add(child);
  return child;
}

export type { Logger };
