import { afterAll, beforeAll } from "vitest";
import type { System } from "./system.js";

/**
 * One system for the enclosing describe block: started before its tests, stopped after them.
 * Returns a getter, since the system exists only once beforeAll has run.
 */
export function useSystem(start: () => Promise<System>): () => System {
  let sys: System | undefined;
  beforeAll(async () => {
    sys = await start();
  }, 90_000);
  afterAll(async () => {
    await sys?.stop();
  }, 30_000);
  return () => {
    if (!sys) throw new Error("the system is not started (beforeAll failed)");
    return sys;
  };
}
