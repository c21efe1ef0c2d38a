/**
 * Member invitations (services/platform/invitations.ts): small statements, each in the caller's
 * transaction where it changes something. The writes record their events (`member.invited`,
 * `member.invitation_revoked`) in that same transaction. Rows come with the database's `now`, the
 * one clock an invitation's expiry is judged on.
 */
import type { Db } from '../../db/sql.js';
import { invitationStatus, type InvitationRow } from '../../domain/platform/invitations.js';
import type { Role } from '../../domain/shared/common.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

/** Every column but the token's hash, which never leaves the database. */
const columns = (db: Db) =>
  db`id, workspace_id, email, role, invited_by, created_at, expires_at, accepted_at, accepted_by_member_id, revoked_at, revoked_by`;

export interface ReadInvitation {
  row: InvitationRow;
  /** The database's clock when the row was read (a transaction's start, inside one). */
  now: Date;
}

type RowWithNow = InvitationRow & { db_now: Date };
const split = ({ db_now, ...row }: RowWithNow): ReadInvitation => ({ row, now: db_now });

/** Whether a member of the workspace has this address (any case). */
export async function workspaceHasMemberEmail(db: Db, workspaceId: string, email: string): Promise<boolean> {
  const [row] = await db`select 1 from members where workspace_id = ${workspaceId} and lower(email) = lower(${email})`;
  return row !== undefined;
}

/** Whether this identity-provider user is a member of the workspace. */
export async function isMemberOfWorkspace(db: Db, workspaceId: string, idpUserId: string): Promise<boolean> {
  const [row] = await db`select 1 from members where workspace_id = ${workspaceId} and idp_user_id = ${idpUserId}`;
  return row !== undefined;
}

/** The open (neither accepted nor revoked) invitation of this address, locked until the transaction ends. */
export async function lockOpenInvitation(
  tx: Db,
  workspaceId: string,
  email: string,
): Promise<ReadInvitation | undefined> {
  const [row] = await tx<RowWithNow[]>`
    select ${columns(tx)}, now() as db_now from member_invitations
    where workspace_id = ${workspaceId} and email = ${email} and accepted_at is null and revoked_at is null
    for update`;
  return row && split(row);
}

/** One invitation of the workspace, locked until the transaction ends. */
export async function lockInvitation(tx: Db, workspaceId: string, id: string): Promise<ReadInvitation | undefined> {
  const [row] = await tx<RowWithNow[]>`
    select ${columns(tx)}, now() as db_now from member_invitations
    where id = ${id} and workspace_id = ${workspaceId} for update`;
  return row && split(row);
}

/** The invitation a token's hash names, in any workspace, locked until the transaction ends. */
export async function lockInvitationByTokenHash(tx: Db, tokenHash: Buffer): Promise<ReadInvitation | undefined> {
  const [row] = await tx<RowWithNow[]>`
    select ${columns(tx)}, now() as db_now from member_invitations where token_hash = ${tokenHash} for update`;
  return row && split(row);
}

/**
 * A new pending invitation, with its `member.invited` event. Answers undefined when the address
 * has an open invitation already (one a concurrent request just made): the partial unique key decides.
 */
export async function insertInvitation(
  tx: Db,
  input: {
    workspaceId: string;
    email: string;
    role: Role;
    tokenHash: Buffer;
    invitedBy: string;
    expiresInDays: number;
  },
): Promise<ReadInvitation | undefined> {
  const [row] = await tx<RowWithNow[]>`
    insert into member_invitations (workspace_id, email, role, token_hash, invited_by, expires_at)
    values (${input.workspaceId}, ${input.email}, ${input.role}, ${input.tokenHash}, ${input.invitedBy},
            now() + make_interval(days => ${input.expiresInDays}))
    on conflict (workspace_id, email) where accepted_at is null and revoked_at is null do nothing
    returning ${columns(tx)}, now() as db_now`;
  if (!row) return undefined;
  const created = split(row);
  await recordWorkspaceEvent(tx, {
    workspaceId: input.workspaceId,
    type: 'member.invited',
    payload: {
      invitation_id: created.row.id,
      email: created.row.email,
      role: created.row.role,
      invited_by_member_id: created.row.invited_by,
      expires_at: created.row.expires_at.toISOString(),
    },
  });
  return created;
}

/**
 * Revokes a locked open invitation. The `member.invitation_revoked` event is recorded when it was
 * still pending; one that had expired is only closed (replaced by a new invitation), and keeps
 * reading as expired.
 */
export async function revokeInvitation(tx: Db, locked: ReadInvitation, revokedBy: string): Promise<void> {
  const { row } = locked;
  await tx`
    update member_invitations set revoked_at = now(), revoked_by = ${revokedBy}
    where id = ${row.id} and accepted_at is null and revoked_at is null`;
  if (invitationStatus(row, locked.now) !== 'pending') return;
  await recordWorkspaceEvent(tx, {
    workspaceId: row.workspace_id,
    type: 'member.invitation_revoked',
    payload: { invitation_id: row.id, email: row.email, revoked_by_member_id: revokedBy },
  });
}

/** Marks a locked pending invitation accepted by the member it made (the database's clock, as the decision read it). */
export async function markInvitationAccepted(tx: Db, invitationId: string, memberId: string): Promise<void> {
  await tx`
    update member_invitations set accepted_at = now(), accepted_by_member_id = ${memberId}
    where id = ${invitationId} and accepted_at is null and revoked_at is null`;
}

/** A page of the workspace's invitations: pending first, then the rest, newest first within each. */
export async function listInvitationsPage(
  db: Db,
  workspaceId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: InvitationRow[]; now: Date; more: boolean }> {
  const rows = await db<RowWithNow[]>`
    select ${columns(db)}, now() as db_now from member_invitations
    where workspace_id = ${workspaceId}
    order by (accepted_at is null and revoked_at is null and expires_at > now()) desc, created_at desc, id desc
    limit ${page.limit + 1} offset ${page.offset}`;
  const read = rows.slice(0, page.limit).map(split);
  const [first] = rows;
  return {
    rows: read.map((r) => r.row),
    now: first?.db_now ?? (await databaseNow(db)),
    more: rows.length > page.limit,
  };
}

async function databaseNow(db: Db): Promise<Date> {
  const [row] = await db<{ now: Date }[]>`select now() as now`;
  return row!.now;
}
