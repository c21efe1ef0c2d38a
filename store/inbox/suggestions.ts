/** Suggested replies: one per inbound reply, pending until a person approves or dismisses it. */
import type { Db } from '../../db/sql.js';
import type { Suggestion } from '../../domain/inbox/inbox.js';
import { iso } from './threads.js';

export interface SuggestionRow {
  id: string;
  thread_id: string;
  message_id: string;
  status: Suggestion['status'];
  subject: string | null;
  body: string;
  model_key: string;
  credits_charged: number;
  edited: boolean;
  sent_message_id: string | null;
  decided_at: Date | null;
  created_at: Date;
}

export const toSuggestion = (r: SuggestionRow): Suggestion => ({
  id: r.id,
  thread_id: r.thread_id,
  message_id: r.message_id,
  status: r.status,
  subject: r.subject,
  body: r.body,
  model_key: r.model_key,
  credits_charged: r.credits_charged,
  edited: r.edited,
  sent_message_id: r.sent_message_id,
  decided_at: iso(r.decided_at),
  created_at: r.created_at.toISOString(),
});

export async function suggestionFor(db: Db, messageId: string): Promise<SuggestionRow | null> {
  const [row] = await db<SuggestionRow[]>`select * from inbox_suggestions where message_id = ${messageId}`;
  return row ?? null;
}

/** The suggestion for a message, unless one is there already (then undefined). */
export async function insertSuggestion(
  db: Db,
  s: {
    id: string;
    workspaceId: string;
    threadId: string;
    messageId: string;
    subject: string | null;
    body: string;
    modelKey: string;
    credits: number;
  },
): Promise<SuggestionRow | undefined> {
  const [row] = await db<SuggestionRow[]>`
    insert into inbox_suggestions (id, workspace_id, thread_id, message_id, subject, body, model_key, credits_charged)
    values (${s.id}, ${s.workspaceId}, ${s.threadId}, ${s.messageId}, ${s.subject}, ${s.body.replace(/\u0000/g, '')}, ${s.modelKey}, ${s.credits})
    on conflict (message_id) do nothing returning *`;
  return row;
}

export async function listSuggestions(
  db: Db,
  workspaceId: string,
  q: { status: Suggestion['status']; thread_id?: string; limit: number },
) {
  const rows = await db<SuggestionRow[]>`
    select * from inbox_suggestions where workspace_id = ${workspaceId} and status = ${q.status}
      ${q.thread_id ? db`and thread_id = ${q.thread_id}` : db``}
    order by created_at desc, id limit ${q.limit}`;
  return rows.map(toSuggestion);
}

export async function readSuggestion(db: Db, workspaceId: string, suggestionId: string): Promise<SuggestionRow | null> {
  const [row] = await db<
    SuggestionRow[]
  >`select * from inbox_suggestions where id = ${suggestionId} and workspace_id = ${workspaceId}`;
  return row ?? null;
}

/** Compare-and-set from pending: undefined when it was decided already. */
export async function markSuggestionApproved(
  db: Db,
  suggestionId: string,
  decision: { sentMessageId: string; edited: boolean; body: string; actor: string | null },
): Promise<SuggestionRow | undefined> {
  const [row] = await db<SuggestionRow[]>`
    update inbox_suggestions set status = 'approved', sent_message_id = ${decision.sentMessageId}, edited = ${decision.edited},
      body = ${decision.body}, decided_by = ${decision.actor}, decided_at = now()
    where id = ${suggestionId} and status = 'pending' returning *`;
  return row;
}

/** Compare-and-set from pending: undefined when it is missing or decided already. */
export async function markSuggestionDismissed(
  db: Db,
  workspaceId: string,
  suggestionId: string,
  actor: string | null,
): Promise<SuggestionRow | undefined> {
  const [row] = await db<SuggestionRow[]>`
    update inbox_suggestions set status = 'dismissed', decided_by = ${actor}, decided_at = now()
    where id = ${suggestionId} and workspace_id = ${workspaceId} and status = 'pending' returning *`;
  return row;
}
