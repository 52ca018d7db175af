import { type Actor, MemberRole } from "../gen/replay/common/v1/common_pb.js";
import { memberRoles } from "../lib/member-role.js";
import type { MemberRow } from "./identity/store.js";

/** The member a management key is bound to, as trusted context. A member row that vanished counts as removed. */
export function toActor(member: MemberRow | undefined, memberId: string): Actor {
  return {
    $typeName: "replay.common.v1.Actor",
    memberId,
    role: member ? memberRoles[member.role] : MemberRole.UNSPECIFIED,
    instanceSettings: member?.instance_settings ?? false,
    grantedCategoryIds: member?.granted_category_ids ?? [],
    grantedServerIds: member?.granted_server_ids ?? [],
    removed: member ? member.removed : true,
  };
}
