import { MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import { memberRoleName, memberRoles } from "../../lib/member-role.js";
import { type Command, command } from "../command.js";
import { bool, choice, pageFlags, pageOf, required, text } from "../flags.js";
import { CliError } from "../output.js";
import { iso, isoOrNull } from "../respond.js";

function roleName(role: MemberRole): string {
  const name = memberRoleName(role);
  if (name === undefined) throw new CliError("INTERNAL_ERROR", "the service answered without a member role");
  return name;
}

/** replayctl member … (spec/operations.md §replayctl). */
export const memberCommands: readonly Command[] = [
  command({
    noun: "member",
    verb: "add",
    flags: { tenant: required(text("T")), role: required(choice(memberRoles)), "instance-settings": bool() },
    run: async (c, v) => {
      const res = await c.admin.addMember({
        tenantId: v.tenant,
        role: v.role,
        instanceSettings: v["instance-settings"],
      });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "update",
    flags: { member: required(text("M")), role: choice(memberRoles), "instance-settings": bool() },
    run: async (c, v) => {
      const res = await c.admin.updateMember({
        memberId: v.member,
        role: v.role ?? MemberRole.UNSPECIFIED,
        instanceSettings: v["instance-settings"],
      });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "remove",
    flags: { member: required(text("M")) },
    run: async (c, v) => {
      const res = await c.admin.removeMember({ memberId: v.member });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "grant",
    flags: { member: required(text("M")), category: text("C"), server: text("S") },
    exactlyOne: ["category", "server"],
    run: async (c, v) => {
      const res = await c.admin.grantMember({
        memberId: v.member,
        categoryId: v.category ?? "",
        serverId: v.server ?? "",
      });
      return { memberId: res.memberId };
    },
  }),
  command({
    noun: "member",
    verb: "list",
    flags: { tenant: required(text("T")), ...pageFlags },
    run: async (c, v) => {
      const res = await c.admin.listMembers({ tenantId: v.tenant, ...pageOf(v) });
      return {
        members: res.members.map((m) => ({
          memberId: m.memberId,
          role: roleName(m.role),
          instanceSettings: m.instanceSettings,
          removed: m.removedAt !== undefined,
          removedAt: isoOrNull(m.removedAt),
          grantedCategoryIds: m.grantedCategoryIds,
          grantedServerIds: m.grantedServerIds,
          createdAt: iso(m.createdAt, "a member's createdAt"),
        })),
        nextPageToken: res.nextPageToken,
      };
    },
  }),
];
