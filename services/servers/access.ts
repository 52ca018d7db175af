import { type Actor, MemberRole } from "../../gen/replay/common/v1/common_pb.js";
import { DomainError } from "../../lib/errors.js";

/** decisions.md §2 "Management keys", on the member's state as the gateway read it for this very request. */
export function requireManager(actor: Actor | undefined): Actor {
  if (!actor) {
    throw new DomainError(
      "ACTOR_BINDING_REQUIRED",
      "this key was minted before member binding; replace it with a key minted by a member",
    );
  }
  if (actor.removed) throw new DomainError("ACTOR_REMOVED", "the member this key belongs to was removed");
  if (actor.role === MemberRole.VIEWER || actor.role === MemberRole.UNSPECIFIED) {
    throw new DomainError("PERMISSION_DENIED", "the member's role cannot manage servers");
  }
  if (!actor.instanceSettings)
    throw new DomainError("PERMISSION_DENIED", "the member's instance-settings permission was withdrawn");
  return actor;
}

/** Owners and admins manage everything; members only the servers and categories granted to them. */
export function canManage(actor: Actor, target: { serverId?: string; categoryId: string | null }): boolean {
  if (actor.role === MemberRole.OWNER || actor.role === MemberRole.ADMIN) return true;
  if (target.serverId !== undefined && actor.grantedServerIds.includes(target.serverId)) return true;
  return target.categoryId !== null && actor.grantedCategoryIds.includes(target.categoryId);
}

export function requireAccess(actor: Actor, target: { serverId?: string; categoryId: string | null }): void {
  if (!canManage(actor, target)) {
    throw new DomainError("TARGET_ACCESS_DENIED", "the member has no access to this server or category");
  }
}

/** decisions.md §4: sourceServerId is shown to owners only. */
export function canSeeSource(actor: Actor | undefined): boolean {
  return actor?.role === MemberRole.OWNER && !actor.removed;
}
