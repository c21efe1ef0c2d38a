/**
 * Admins managing members: one function per use case, each one transaction that locks the
 * workspace's members, asks the pure decision (domain/platform/members.ts) and writes the change
 * with its audit entry and event (store/platform/members.ts).
 */
import type { Sql } from '../../db/sql.js';
import { decideMemberChange, type MemberChange } from '../../domain/platform/members.js';
import type { Member } from '../../domain/platform/workspaces.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import { changeMemberRole, lockWorkspaceMembers, removeMember } from '../../store/platform/members.js';
import { getMember } from '../../store/platform/workspaces.js';

interface Actor {
  workspaceId: string;
  memberId: string | null;
}

/**
 * Changes a member's role or removes the member. A role the member already has changes nothing
 * (no audit entry, no event). Unknown ids, and ids of other workspaces, are 404; an actor
 * demoted or removed meanwhile is 403; a change that would leave the workspace without an admin is 409.
 */
export async function changeMember(sql: Sql, actor: Actor, change: MemberChange): Promise<Member | null> {
  return sql.begin(async (tx) => {
    const members = await lockWorkspaceMembers(tx, actor.workspaceId);
    const decision = decideMemberChange(members, actor.memberId, change);
    if (decision.outcome === 'not_found') throw notFound('Member');
    if (decision.outcome === 'forbidden') throw new ApiError('forbidden', decision.detail);
    if (decision.outcome === 'refused') throw new ApiError('conflict', decision.detail);
    const target = members.find((m) => m.id === change.memberId)!;
    const audit = { workspaceId: actor.workspaceId, actorMemberId: actor.memberId, target };
    if (decision.outcome === 'allowed') {
      if (change.kind === 'remove') {
        await removeMember(tx, audit);
        return null;
      }
      await changeMemberRole(tx, { ...audit, role: change.role });
    }
    return (await getMember(tx, actor.workspaceId, change.memberId)) ?? null;
  });
}
