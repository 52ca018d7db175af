import { describe, expect, it } from "vitest";
import { whenReachable } from "./startup-wait.js";

const unreachable = (err: unknown) => (err as { code?: string }).code === "DOWN";
const down = () => Object.assign(new Error("down"), { code: "DOWN" });

describe("whenReachable", () => {
  it("runs the step again while its dependency is unreachable, and resolves once it answers", async () => {
    let tries = 0;
    const value = await whenReachable(
      "test",
      async () => {
        tries++;
        if (tries < 3) throw down();
        return "up";
      },
      unreachable,
    );
    expect(value).toBe("up");
    expect(tries).toBe(3);
  });

  it("lets any other failure through at once", async () => {
    let tries = 0;
    const failing = whenReachable(
      "test",
      async () => {
        tries++;
        throw new Error("bad password");
      },
      unreachable,
    );
    await expect(failing).rejects.toThrow("bad password");
    expect(tries).toBe(1);
  });

  it("gives up with the last error once the wait is over", async () => {
    let tries = 0;
    const failing = whenReachable(
      "test",
      async () => {
        tries++;
        throw down();
      },
      unreachable,
      600,
    );
    await expect(failing).rejects.toThrow("down");
    // 0.25 s, then 0.5 s would pass the 0.6 s: two tries.
    expect(tries).toBe(2);
  });
});
