/**
 * Admins managing members: the request and answer schemas, and the pure decision a change is
 * checked with (services/platform/members.ts runs it on the members it locked).
 */
import { z } from 'zod';
import { queryInteger, RoleSchema, TimestampSchema, UuidSchema, type Role } from '../shared/common.js';

export const MemberRoleUpdateSchema = z
  .object({ role: RoleSchema.describe('The new role: `admin` manages members, keys and billing') })
  .meta({ id: 'MemberRoleUpdate' });

export const MemberAuditActionSchema = z.enum(['role_changed', 'removed', 'joined']);
export type MemberAuditAction = z.infer<typeof MemberAuditActionSchema>;

export const MemberAuditEntrySchema = z
  .object({
    id: z.int(),
    action: MemberAuditActionSchema,
    actor_member_id: UuidSchema.nullable().describe('The admin who made the change'),
    target_member_id: UuidSchema.describe('The member changed (kept after a removal)'),
    target_user_id: z.string().describe('The changed member’s identity-provider user id'),
    target_email: z.string(),
    role_before: RoleSchema.nullable().describe('Null when the member joined'),
    role_after: RoleSchema.nullable().describe('Null when the member was removed'),
    joined_via: z
      .enum(['sign_up', 'first_use', 'invitation'])
      .nullable()
      .describe(
        'How a member joined (`joined` only): signing the workspace up, first use of their organisation’s token, or an invitation',
      ),
    created_at: TimestampSchema,
  })
  .meta({ id: 'MemberAuditEntry' });
export type MemberAuditEntry = z.infer<typeof MemberAuditEntrySchema>;

export const MemberAuditQuerySchema = z.object({
  limit: queryInteger(z.int().min(1).max(200).default(50)).describe('Entries per page, 1 to 200'),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)).describe('Entries to skip, 0 to 1,000,000'),
});

export const MemberAuditPageSchema = z
  .object({
    entries: z.array(MemberAuditEntrySchema).describe('Newest first'),
    next_offset: z.int().nullable().describe('The offset of the next page; null on the last'),
  })
  .meta({ id: 'MemberAuditPage' });

export type MemberChange = { kind: 'role'; memberId: string; role: Role } | { kind: 'remove'; memberId: string };

export type MemberChangeDecision =
  | { outcome: 'not_found' }
  /** The actor is no longer an admin (demoted or removed since their request was authenticated). */
  | { outcome: 'forbidden'; detail: string }
  /** Already in that role: nothing to write, nothing to record. */
  | { outcome: 'unchanged' }
  | { outcome: 'refused'; detail: string }
  | { outcome: 'allowed'; before: Role; after: Role | null };

/**
 * Whether the admin `actorId` may make `change` to a workspace whose members are `members` (read
 * under lock, so nobody changes them before the change is written). The actor is checked again
 * here, since a concurrent change may have demoted or removed them after auth let the request in.
 * A workspace always keeps an admin: the last one can be neither demoted nor removed, by anyone,
 * including themselves. An admin may demote or remove themselves while another admin remains.
 */
export function decideMemberChange(
  members: readonly { id: string; role: Role }[],
  actorId: string | null,
  change: MemberChange,
): MemberChangeDecision {
  const target = members.find((m) => m.id === change.memberId);
  if (!target) return { outcome: 'not_found' };
  if (!members.some((m) => m.id === actorId && m.role === 'admin'))
    return { outcome: 'forbidden', detail: 'Only a workspace admin may do this.' };
  const after = change.kind === 'role' ? change.role : null;
  if (after === target.role) return { outcome: 'unchanged' };
  const otherAdmins = members.filter((m) => m.role === 'admin' && m.id !== target.id).length;
  if (target.role === 'admin' && otherAdmins === 0) {
    return {
      outcome: 'refused',
      detail:
        change.kind === 'role'
          ? 'This member is the workspace’s last admin and cannot be made a member: make another member an admin first.'
          : 'This member is the workspace’s last admin and cannot be removed: make another member an admin first.',
    };
  }
  return { outcome: 'allowed', before: target.role, after };
}
