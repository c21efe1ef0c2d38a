/**
 * What the onboarding checklist reads of a workspace, in one statement: when each step first
 * became true of what is there now (deleted rows and tables in the trash no longer count, except API keys, which are
 * kept as deleted rows: a key minted counts once minted). The per-member dismissal is the one row
 * of its own, in `onboarding_dismissals`.
 */
import type { Db } from '../../db/sql.js';
import type { OnboardingFacts } from '../../domain/onboarding/checklist.js';

export async function readOnboardingFacts(db: Db, workspaceId: string): Promise<OnboardingFacts> {
  const [row] = await db<{ [K in keyof OnboardingFacts | 'pnet_connected']: Date | null }[]>`
    select
      (select min(connected_at) from pnet_accounts where workspace_id = ${workspaceId} and status = 'connected') as pnet_connected,
      (select min(created_at) from inbox_mailboxes where workspace_id = ${workspaceId}) as mailbox_connected,
      (select min(created_at) from tables where workspace_id = ${workspaceId} and deleted_at is null) as first_table,
      (select min(created_at) from sequences where workspace_id = ${workspaceId}) as first_sequence,
      (select min(created_at) from business_documents where workspace_id = ${workspaceId}) as business_context,
      -- The workspace's first key is made with it; the step is a second one.
      (select created_at from api_keys where workspace_id = ${workspaceId} order by created_at, id offset 1 limit 1) as api_key,
      (select created_at from members where workspace_id = ${workspaceId} order by created_at, id offset 1 limit 1) as teammate_invited`;
  const r = row!;
  const earliest = (...dates: (Date | null)[]) =>
    dates.filter((d): d is Date => d !== null).sort((a, b) => a.getTime() - b.getTime())[0] ?? null;
  return {
    sender_connected: earliest(r.pnet_connected, r.mailbox_connected),
    mailbox_connected: r.mailbox_connected,
    first_table: r.first_table,
    first_sequence: r.first_sequence,
    business_context: r.business_context,
    api_key: r.api_key,
    teammate_invited: r.teammate_invited,
  };
}

export async function readOnboardingDismissal(
  db: Db,
  workspaceId: string,
  memberId: string | null,
): Promise<Date | null> {
  if (!memberId) return null;
  const [row] = await db<{ dismissed_at: Date }[]>`
    select dismissed_at from onboarding_dismissals where workspace_id = ${workspaceId} and member_id = ${memberId}`;
  return row?.dismissed_at ?? null;
}

/** Dismisses the checklist for one member; dismissing again keeps the first moment. */
export async function dismissOnboarding(db: Db, workspaceId: string, memberId: string): Promise<void> {
  await db`insert into onboarding_dismissals (workspace_id, member_id) values (${workspaceId}, ${memberId}) on conflict do nothing`;
}

export async function restoreOnboarding(db: Db, workspaceId: string, memberId: string): Promise<void> {
  await db`delete from onboarding_dismissals where workspace_id = ${workspaceId} and member_id = ${memberId}`;
}
