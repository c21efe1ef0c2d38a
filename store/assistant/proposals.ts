/**
 * Cards (interface spec: Action proposal). A card is written once per tool call of an answer
 * (unique on message and call), decided once (compare-and-set on `pending`, the decision's key kept
 * so the same decision retried passes and any other is refused), and ended once (compare-and-set on
 * `applying`).
 */
import { recordWorkspaceEvent, withinTransaction } from '../notifications/outbox.js';
import type { Db } from '../../db/sql.js';
import {
  isGrantable,
  type AppliedResult,
  type ApprovalScope,
  type Decision,
  type PreparedColumn,
  type Proposal,
  type ProposalDetail,
  type ProposalStatus,
} from '../../domain/assistant/assistant.js';
import { notFound } from '../../domain/shared/errors.js';

export interface ProposalRow {
  id: string;
  workspace_id: string;
  conversation_id: string | null;
  message_id: string | null;
  tool_call_id: string | null;
  member_id: string | null;
  origin: Proposal['origin'];
  kind: Proposal['kind'];
  verb: string;
  input: Record<string, unknown>;
  batch_id: string | null;
  verb_label: string;
  summary: string;
  detail: ProposalDetail | null;
  price_credits: number | null;
  price_per: 'call' | 'day';
  expected_credits: number | null;
  charged_credits: number | null;
  price_label: string;
  approve_label: string;
  price_aside: string;
  destructive: boolean;
  loss: string | null;
  sends: boolean;
  status: ProposalStatus;
  decision: Decision | null;
  decision_key: string | null;
  scope: ApprovalScope | null;
  proposed_at: Date;
  expires_at: Date;
  decided_at: Date | null;
  decided_by_display_name: string | null;
  applied_result: AppliedResult | null;
  error: string | null;
  source_column_id: string | null;
  source_record_id: string | null;
  runs_column_id: string | null;
  prepared_column: PreparedColumn | null;
  hold_id: string | null;
}

export function toProposal(r: ProposalRow): Proposal {
  return {
    id: r.id,
    origin: r.origin,
    conversation_id: r.conversation_id,
    message_id: r.message_id,
    source_column_id: r.source_column_id,
    source_record_id: r.source_record_id,
    runs_column_id: r.runs_column_id,
    verb: r.verb,
    kind: r.kind,
    batch_id: r.batch_id,
    verb_label: r.verb_label,
    summary: r.summary,
    detail: r.detail,
    price_credits: r.price_credits,
    price_per: r.price_per,
    expected_credits: r.expected_credits,
    charged_credits: r.charged_credits,
    price_label: r.price_label,
    approve_label: r.approve_label,
    price_aside: r.price_aside,
    destructive: r.destructive,
    loss: r.loss,
    grantable: isGrantable(r),
    status: r.status,
    proposed_at: r.proposed_at.toISOString(),
    decided_at: r.decided_at?.toISOString() ?? null,
    decided_by_display_name: r.decided_by_display_name,
    applied_result: r.applied_result,
    error: r.error,
    prepared_column: r.prepared_column,
  };
}

/** What a card is made of when proposed. */
export type NewProposal = Pick<
  ProposalRow,
  | 'workspace_id'
  | 'conversation_id'
  | 'message_id'
  | 'tool_call_id'
  | 'member_id'
  | 'origin'
  | 'kind'
  | 'verb'
  | 'input'
  | 'batch_id'
  | 'verb_label'
  | 'summary'
  | 'detail'
  | 'price_credits'
  | 'price_per'
  | 'expected_credits'
  | 'price_label'
  | 'approve_label'
  | 'price_aside'
  | 'destructive'
  | 'loss'
  | 'sends'
  | 'source_column_id'
  | 'source_record_id'
  | 'runs_column_id'
  | 'prepared_column'
> & { lifetimeSeconds: number };

/** Writes the card, or finds the one this tool call already raised. */
export async function insertProposal(db: Db, p: NewProposal): Promise<ProposalRow> {
  return withinTransaction(db, (tx) => insertProposalIn(tx, p));
}

async function insertProposalIn(db: Db, p: NewProposal): Promise<ProposalRow> {
  const [row] = await db<ProposalRow[]>`
    insert into assistant_proposals (workspace_id, conversation_id, message_id, tool_call_id, member_id, origin, kind, verb, input,
      batch_id, verb_label, summary, detail, price_credits, price_per, expected_credits, price_label, approve_label, price_aside,
      destructive, loss, sends, source_column_id, source_record_id, runs_column_id, prepared_column, expires_at)
    values (${p.workspace_id}, ${p.conversation_id}, ${p.message_id}, ${p.tool_call_id}, ${p.member_id}, ${p.origin}, ${p.kind}, ${p.verb},
      ${db.json(p.input as never)}, ${p.batch_id}, ${p.verb_label}, ${p.summary}, ${p.detail ? db.json(p.detail as never) : null},
      ${p.price_credits}, ${p.price_per}, ${p.expected_credits}, ${p.price_label}, ${p.approve_label}, ${p.price_aside},
      ${p.destructive}, ${p.loss}, ${p.sends}, ${p.source_column_id}, ${p.source_record_id}, ${p.runs_column_id},
      ${p.prepared_column ? db.json(p.prepared_column) : null}, now() + ${p.lifetimeSeconds}::int * interval '1 second')
    on conflict (message_id, tool_call_id) do nothing
    returning *`;
  if (row) {
    if (row.status === 'pending') {
      await recordWorkspaceEvent(db, {
        workspaceId: row.workspace_id,
        type: 'card.awaiting_approval',
        payload: {
          card_id: row.id,
          conversation_id: row.conversation_id ?? null,
          title: String(row.summary ?? row.verb_label ?? row.kind),
        },
      });
    }
    return row;
  }
  const [existing] = await db<ProposalRow[]>`
    select * from assistant_proposals where message_id = ${p.message_id} and tool_call_id = ${p.tool_call_id}`;
  return existing!;
}

export async function findProposal(db: Db, workspaceId: string, id: string): Promise<ProposalRow> {
  const [row] = await db<
    ProposalRow[]
  >`select * from assistant_proposals where id = ${id} and workspace_id = ${workspaceId}`;
  if (!row) throw notFound('Card');
  return row;
}

export async function proposalsByIds(db: Db, workspaceId: string, ids: string[]): Promise<Map<string, ProposalRow>> {
  const rows = await db<
    ProposalRow[]
  >`select * from assistant_proposals where workspace_id = ${workspaceId} and id = any(${ids}::uuid[])`;
  return new Map(rows.map((r) => [r.id, r]));
}

export async function listProposals(
  db: Db,
  workspaceId: string,
  q: { status?: ProposalStatus | undefined; conversationId?: string | undefined; limit: number; offset: number },
): Promise<{ actions: Proposal[]; total_count: number }> {
  const where = db`workspace_id = ${workspaceId}
    ${q.status ? db`and status = ${q.status}` : db``}
    ${q.conversationId ? db`and conversation_id = ${q.conversationId}` : db``}`;
  const rows = await db<
    ProposalRow[]
  >`select * from assistant_proposals where ${where} order by position limit ${q.limit} offset ${q.offset}`;
  const [count] = await db<{ n: number }[]>`select count(*)::int as n from assistant_proposals where ${where}`;
  return { actions: rows.map(toProposal), total_count: count?.n ?? 0 };
}

export interface ProposalDecision {
  decision: Decision;
  /** The decision's own key (the Update's id): the same decision retried passes the guard again. */
  key: string;
  scope: ApprovalScope;
  memberId: string | null;
  displayName: string | null;
}

/**
 * pending -> applying (approved or automatic) or dismissed (rejected). Answers the card when this
 * decision holds (made now, or the same decision made before), undefined when another decided it.
 */
export async function decideProposal(db: Db, id: string, d: ProposalDecision): Promise<ProposalRow | undefined> {
  const [row] = await db<ProposalRow[]>`
    update assistant_proposals set
      status = case when status <> 'pending' then status when ${d.decision} = 'rejected' then 'dismissed' else 'applying' end,
      decision = coalesce(decision, ${d.decision}), decision_key = coalesce(decision_key, ${d.key}),
      scope = coalesce(scope, ${d.scope}), decided_at = coalesce(decided_at, now()),
      decided_by_member_id = coalesce(decided_by_member_id, ${d.memberId}),
      decided_by_display_name = coalesce(decided_by_display_name, ${d.displayName})
    where id = ${id} and (status = 'pending' or decision_key = ${d.key})
    returning *`;
  return row;
}

export async function setProposalHold(db: Db, id: string, holdId: string): Promise<void> {
  await db`update assistant_proposals set hold_id = ${holdId} where id = ${id} and hold_id is null`;
}

export async function setRunsColumn(db: Db, id: string, columnId: string): Promise<void> {
  await db`update assistant_proposals set runs_column_id = ${columnId} where id = ${id}`;
}

/** applying -> applied | failed, once. */
export async function endProposal(
  db: Db,
  id: string,
  end: {
    status: 'applied' | 'failed';
    appliedResult: AppliedResult | null;
    error: string | null;
    chargedCredits: number | null;
  },
): Promise<ProposalRow | undefined> {
  const [row] = await db<ProposalRow[]>`
    update assistant_proposals set status = ${end.status}, applied_result = ${end.appliedResult ? db.json(end.appliedResult) : null},
      error = ${end.error}, charged_credits = ${end.chargedCredits}
    where id = ${id} and status = 'applying'
    returning *`;
  return row;
}

/** pending -> expired for the cards of an answer whose time is up; answers the ones it expired. */
export async function expireProposals(db: Db, messageId: string): Promise<ProposalRow[]> {
  return db<ProposalRow[]>`
    update assistant_proposals set status = 'expired', decided_at = now()
    where message_id = ${messageId} and status = 'pending' returning *`;
}

export async function proposalsOfMessage(db: Db, messageId: string): Promise<ProposalRow[]> {
  return db<ProposalRow[]>`select * from assistant_proposals where message_id = ${messageId} order by position`;
}

/** A card by id alone, for the turn's own activities (the workspace was checked when it was decided). */
export async function proposalById(db: Db, id: string): Promise<ProposalRow | undefined> {
  const [row] = await db<ProposalRow[]>`select * from assistant_proposals where id = ${id}`;
  return row;
}

export async function proposalOfToolCall(
  db: Db,
  messageId: string,
  toolCallId: string,
): Promise<ProposalRow | undefined> {
  const [row] = await db<
    ProposalRow[]
  >`select * from assistant_proposals where message_id = ${messageId} and tool_call_id = ${toolCallId}`;
  return row;
}

/** pending -> failed: the column an add_column card needed could not be made; nothing was held. */
export async function failUnprepared(db: Db, id: string, reason: string): Promise<void> {
  await db`update assistant_proposals set status = 'failed', error = ${reason}, decided_at = now() where id = ${id} and status = 'pending'`;
}

/** Notes that the card's call starts now; false when it had started before (a retry after a crash mid-call). */
export async function startCall(db: Db, id: string): Promise<boolean> {
  const rows =
    await db`update assistant_proposals set call_started_at = now() where id = ${id} and call_started_at is null returning id`;
  return rows.length === 1;
}
