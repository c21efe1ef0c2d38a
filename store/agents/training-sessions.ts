/**
 * Queries of training sessions (interface spec: Training session): creating one with its sample
 * contacts, and reading. Scoped to the workspace and sequence.
 */
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
  newDoc,
  Transition,
  SessionDoc,
  readyToPropose,
  type SampleContact,
  type TrainingSnapshot,
  type TrainingView,
} from '../../domain/agents/training-sessions.js';
import type { TrainingSession, TrainingStart, TrainingStatus } from '../../domain/agents/training-session-schemas.js';
import type { CellValue } from '../../domain/tables/tables.js';

export interface SequenceRecord {
  id: string;
  audience_table_id: string | null;
  audience_mapping: Record<string, string | null>;
  outbound_agent_id: string | null;
}

export const text = (v: CellValue | undefined) => (v === null || v === undefined ? '' : String(v).trim());

/** The first `size` rows of the audience table, as contacts with their fields by column name. */
export async function sampleContacts(
  sql: Sql,
  workspaceId: string,
  sequence: SequenceRecord,
  size: number,
): Promise<SampleContact[]> {
  const columns = await sql<{ id: string; name: string }[]>`
    select id, name from table_columns where table_id = ${sequence.audience_table_id} and workspace_id = ${workspaceId} order by position`;
  const rows = await sql<{ id: string; cells: Record<string, CellValue> }[]>`
    select id, cells from table_rows where table_id = ${sequence.audience_table_id} and workspace_id = ${workspaceId} order by seq limit ${size}`;
  const mapping = sequence.audience_mapping ?? {};
  const at = (cells: Record<string, CellValue>, field: string) => {
    const column = mapping[`${field}_column_id`];
    return column ? text(cells[column]) : '';
  };
  const byName = (cells: Record<string, CellValue>, pattern: RegExp) =>
    text(cells[columns.find((c) => pattern.test(c.name.trim().toLowerCase()))?.id ?? '']);
  return rows.map((row) => {
    // The sequence's column mapping first; columns named like the field otherwise.
    const first = at(row.cells, 'first_name') || byName(row.cells, /^first[ _]?name$/);
    const last = at(row.cells, 'last_name') || byName(row.cells, /^last[ _]?name$/);
    const name = [first, last].filter(Boolean).join(' ') || byName(row.cells, /^(full[ _]?)?name$/);
    const email = at(row.cells, 'email') || byName(row.cells, /^e-?mail( address)?$/);
    const profileUrl = at(row.cells, 'profile_url') || byName(row.cells, /^(profile|profile[ _]?url|linkedin( url)?)$/);
    const company = at(row.cells, 'company_name');
    const fields = columns.map((c) => ({ name: c.name, value: text(row.cells[c.id]) })).filter((f) => f.value !== '');
    if (company && !fields.some((f) => /^company/i.test(f.name))) fields.push({ name: 'company', value: company });
    return {
      record_id: row.id,
      person: { ...(name ? { name } : {}), ...(email ? { email } : {}), ...(profileUrl ? { profileUrl } : {}) },
      label: name || email || profileUrl || `Row ${row.id.slice(0, 8)}`,
      fields,
      profile_mismatch: !name && !email && !profileUrl,
    };
  });
}

export async function createSession(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  body: TrainingStart,
): Promise<SessionRow> {
  const [sequence] = await sql<SequenceRecord[]>`
    select id, audience_table_id, audience_mapping, outbound_agent_id from sequences where id = ${sequenceId} and workspace_id = ${workspaceId}`;
  if (!sequence) throw notFound('Sequence');
  if (!sequence.outbound_agent_id)
    throw new ApiError(
      'conflict',
      'The sequence has no outbound agent; set one with PUT /sequences/{sequence_id}/agent/ first.',
    );
  if (!sequence.audience_table_id)
    throw new ApiError('conflict', 'The sequence has no audience table to take sample contacts from.');
  const samples = await sampleContacts(sql, workspaceId, sequence, body.sample_size);
  if (samples.length === 0) throw new ApiError('conflict', 'The audience table has no rows to train on.');
  const [agent] = await sql<
    { version: number }[]
  >`select version from outbound_agents where id = ${sequence.outbound_agent_id}`;
  try {
    const [row] = await sql<SessionRow[]>`
      insert into training_sessions (workspace_id, sequence_id, agent_id, base_version, status, doc)
      values (${workspaceId}, ${sequenceId}, ${sequence.outbound_agent_id}, ${agent!.version}, 'running',
        ${sql.json(newDoc(samples, Math.min(body.ready_after, body.sample_size, samples.length)) as never)})
      returning *`;
    return row!;
  } catch (error) {
    if ((error as { code?: string }).code === '23505')
      throw new ApiError('conflict', 'The sequence already has a training session under way; close it first.');
    throw error;
  }
}

/** The session, if it belongs to this workspace and sequence. */
export async function findSession(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  sessionId: string,
): Promise<SessionRow | undefined> {
  const row = await loadSession(sql, sessionId);
  return row && row.workspace_id === workspaceId && row.sequence_id === sequenceId ? row : undefined;
}

export async function listSessions(sql: Sql, workspaceId: string, sequenceId: string): Promise<TrainingSession[]> {
  const [sequence] = await sql`select id from sequences where id = ${sequenceId} and workspace_id = ${workspaceId}`;
  if (!sequence) throw notFound('Sequence');
  const rows = await sql<SessionRow[]>`
    select * from training_sessions where sequence_id = ${sequenceId} and workspace_id = ${workspaceId} order by created_at desc, id desc`;
  return rows.map(toSession);
}

export interface SessionRow {
  id: string;
  workspace_id: string;
  sequence_id: string;
  agent_id: string;
  base_version: number;
  applied_version: number | null;
  revision: number;
  status: TrainingStatus;
  error: string;
  note_waiting: boolean;
  doc: SessionDoc;
  created_at: Date;
}

export interface TrainingAnswer {
  session: TrainingSession;
  view: TrainingView;
}

/** Contact states that owe a write (the rule lives in the domain). */

/** Write attempts before a message is stored with its error instead (the person can note it to retry). */
export const writeAttempts = 3;

export function toSession(row: SessionRow): TrainingSession {
  const { doc } = row;
  return {
    id: row.id,
    agent_id: row.agent_id,
    sequence_id: row.sequence_id,
    applied_version: row.applied_version,
    base_version: row.base_version,
    revision: row.revision,
    status: row.status,
    created_at: row.created_at.toISOString(),
    error: row.error,
    note_waiting: row.note_waiting,
    reviewed_ids: doc.reviewed_ids,
    steps: doc.steps,
    progress: doc.progress,
    proposal: doc.proposal,
    contacts: doc.contacts,
  };
}

export const transitionOf = (row: SessionRow): Transition => ({
  head: { status: row.status, note_waiting: row.note_waiting, error: row.error },
  doc: row.doc,
});

/** What decideTraining decides from: the session as read, with the revision it was read at. */
export const snapshotOf = (row: SessionRow): TrainingSnapshot => ({ ...transitionOf(row), revision: row.revision });

/**
 * Writes a decided transition if the session is still at `revision` (the one it was decided
 * from), bumping it; undefined when another write got there first and nothing was written. The
 * revision check and the write are one statement: a check read apart from the write could be
 * overtaken by another writer in between, and one change would be lost.
 */
export async function writeAtRevision(
  tx: Db,
  sessionId: string,
  revision: number,
  next: Transition,
): Promise<SessionRow | undefined> {
  const [row] = await tx<SessionRow[]>`
    update training_sessions
    set status = ${next.head.status}, note_waiting = ${next.head.note_waiting}, error = ${next.head.error},
      doc = ${tx.json(next.doc as never)}, revision = revision + 1, updated_at = now()
    where id = ${sessionId} and revision = ${revision}
    returning *`;
  return row;
}

export function viewOf(row: SessionRow): TrainingView {
  return {
    revision: row.revision,
    status: row.status,
    contacts: Object.fromEntries(row.doc.contacts.map((c) => [c.record_id, c.state])),
    readyToPropose: readyToPropose(transitionOf(row)),
  };
}

export const answer = (row: SessionRow): TrainingAnswer => ({ session: toSession(row), view: viewOf(row) });

export async function loadSession(db: Db, sessionId: string): Promise<SessionRow | undefined> {
  const [row] = await db<SessionRow[]>`select * from training_sessions where id = ${sessionId}`;
  return row;
}

/** The agent version a session's proposal became. */
export async function recordAppliedVersion(tx: Db, sessionId: string, version: number): Promise<void> {
  await tx`update training_sessions set applied_version = ${version} where id = ${sessionId}`;
}
