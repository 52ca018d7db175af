import { createReplayClient, type Problem, type ReplayClient } from "@replay/client";
import { describe, expect, it } from "vitest";

// Compile-time checks of the route types, run by `tsc -p tsconfig.test.json` (this package's
// `npm test`, and the root's `npm run lint`): each misuse below must be a type error, and an
// expected error that does not come fails tsc. The functions are never called.

const client: ReplayClient = createReplayClient({ baseUrl: "http://127.0.0.1:1" });

describe("the route types", () => {
  it("refuse a path that is not a route, a missing field, a wrong type, a missing path parameter", () => {
    const misuses = [
      // @ts-expect-error: not a route of openapi.json
      () => client.GET("/v1/api/nope"),
      // @ts-expect-error: a pending server needs its name
      () => client.POST("/v1/api/servers", { body: {} }),
      // @ts-expect-error: page_size is a number
      () => client.GET("/v1/replays", { params: { query: { page_size: "5" } } }),
      // @ts-expect-error: the replay's id is a path parameter the call must give
      () => client.GET("/v1/replays/{id}", {}),
      // @ts-expect-error: tick is a number
      () => client.POST("/v1/api/timeline-events", { body: { serverId: "s", tick: "5", label: "l" } }),
      // @ts-expect-error: GET /v1/api/servers answers { servers }, not a page
      async () => (await client.GET("/v1/api/servers")).data?.results,
    ];
    expect(misuses).toHaveLength(6);
  });

  it("type each answer and its problem", () => {
    const uses = [
      async () => {
        const { data, error } = await client.GET("/v1/api/servers");
        const names: string[] | undefined = data?.servers.map((s) => s.name);
        const code: string | undefined = error?.code;
        return [names, code];
      },
      async () => {
        const ids: string[] = [];
        for await (const replay of client.replays.list({ page_size: 50 })) ids.push(replay.id);
        return ids;
      },
      (problem: Problem) => problem.clock_skew_seconds,
    ];
    expect(uses).toHaveLength(3);
  });
});
