import { describe, expect, it } from "vitest";
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { memberRoleName, memberRoles } from "./member-role.js";

describe("member roles", () => {
  it("pairs every named wire role with its name, both ways", () => {
    for (const [name, role] of Object.entries(memberRoles)) expect(memberRoleName(role)).toBe(name);
    const named = Object.values(MemberRole).filter((v) => typeof v === "number" && v !== MemberRole.UNSPECIFIED);
    expect(new Set(Object.values(memberRoles))).toEqual(new Set(named));
  });

  it("has no name for UNSPECIFIED or an unknown value", () => {
    expect(memberRoleName(MemberRole.UNSPECIFIED)).toBeUndefined();
    expect(memberRoleName(99 as MemberRole)).toBeUndefined();
  });
});
