// The member roles by name: the words the identity database stores and replayctl takes, and the
// wire enum the services read from the actor. The one place the two are paired.
import { MemberRole } from "../gen/replay/common/v1/common_pb.js";

export const memberRoles = {
  owner: MemberRole.OWNER,
  admin: MemberRole.ADMIN,
  member: MemberRole.MEMBER,
  viewer: MemberRole.VIEWER,
} as const satisfies Record<string, MemberRole>;

export type MemberRoleName = keyof typeof memberRoles;

/** The name of a wire role, or undefined for UNSPECIFIED and values no name stands for. */
export function memberRoleName(role: MemberRole): MemberRoleName | undefined {
  for (const [name, value] of Object.entries(memberRoles)) if (value === role) return name as MemberRoleName;
  return undefined;
}
