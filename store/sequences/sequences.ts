/** Queries of sequences, their versions, senders, contacts and approval queue. Every query is scoped to the caller's workspace. */
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import {
  AudienceMappingSchema,
  SequenceGraphSchema,
  contactFieldsOf,
  contactKeyOf,
  validateGraph,
  type Approval,
  type AudienceMapping,
  type ContactStatus,
  type EnrolResult,
  type Sequence,
  type SequenceContact,
  type SequenceCreate,
  type SequenceGraph,
  type SequenceSender,
  type SequenceUpdate,
} from '../../domain/sequences/sequences.js';
import { AdvanceContact } from '../../domain/sequences/advance.js';
import { migrationOf } from '../../domain/sequences/contact-rules.js';
import { recordContactStopped } from './contact-moves.js';

/** A graph the schema accepted but whose shape is wrong: answered 422 with these issues. */

const iso = (d: Date | null) => (d ? d.toISOString() : null);

interface SequenceRow {
  id: string;
  workspace_id: string;
  name: string;
  status: Sequence['status'];
  audience_table_id: string | null;
  audience_mapping: AudienceMapping;
  feed_new_rows: boolean;
  email_mode: 'manual' | 'automatic';
  pnet_mode: 'manual' | 'automatic';
  current_version: number;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

/** A sequence contact's row: what a move reads (AdvanceContact), and what only the API shows. */
export interface ContactRow extends AdvanceContact {
  error: string | null;
  finished_at: Date | null;
  updated_at: Date;
}

export function toContact(r: ContactRow): SequenceContact {
  return {
    id: r.id,
    sequence_id: r.sequence_id,
    row_id: r.row_id,
    contact_key: r.contact_key,
    email: r.email,
    profile_url: r.profile_url,
    first_name: r.first_name,
    last_name: r.last_name,
    company_name: r.company_name,
    sender_profile_id: r.sender_profile_id,
    status: r.status,
    version: r.version,
    current_step_id: r.current_step_id,
    done_steps: r.done_steps,
    wait: r.wait_reason ? { reason: r.wait_reason, until: iso(r.wait_until) } : null,
    stop_reason: r.stop_reason,
    error: r.error,
    enrolled_at: r.enrolled_at.toISOString(),
    finished_at: iso(r.finished_at),
    updated_at: r.updated_at.toISOString(),
  };
}

async function sendersOf(db: Db, sequenceId: string): Promise<SequenceSender[]> {
  return db<SequenceSender[]>`
    select sender_profile_id, from_email, from_name from sequence_senders where sequence_id = ${sequenceId} order by position`;
}

async function toSequence(db: Db, r: SequenceRow): Promise<Sequence> {
  const [[version], senders, counts] = await Promise.all([
    db<
      { graph: SequenceGraph }[]
    >`select graph from sequence_versions where sequence_id = ${r.id} and version = ${r.current_version}`,
    sendersOf(db, r.id),
    db<
      { status: ContactStatus; n: number }[]
    >`select status, count(*)::int as n from sequence_contacts where sequence_id = ${r.id} group by status`,
  ]);
  const contact_counts = { active: 0, paused: 0, failed: 0, stopped: 0, completed: 0 };
  for (const c of counts) contact_counts[c.status] = c.n;
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    audience_table_id: r.audience_table_id,
    audience_mapping: AudienceMappingSchema.parse(r.audience_mapping),
    feed_new_rows: r.feed_new_rows,
    email_mode: r.email_mode,
    pnet_mode: r.pnet_mode,
    senders,
    version: r.current_version,
    graph: version!.graph,
    revision: r.revision,
    contact_counts,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

/** The newest row of the audience table now: a feed enrols only rows added after it. */
const feedStart = (db: Db, tableId: string | null) =>
  db`(select coalesce(max(seq), 0) from table_rows where table_id = ${tableId})`;

function checkGraph(graph: SequenceGraph) {
  const issues = validateGraph(graph);
  if (issues.length > 0) throw new ValidationRefusal(issues);
}

/** The audience table, the mapped columns and the senders must all be the workspace's own. */
async function checkReferences(
  db: Db,
  workspaceId: string,
  input: {
    audience_table_id?: string | null;
    audience_mapping?: AudienceMapping | undefined;
    senders?: SequenceSender[];
    graph?: SequenceGraph | undefined;
  },
) {
  const templated = (input.graph?.steps ?? []).flatMap((s, i) =>
    (s.type === 'email' || s.type === 'pnet') && s.template_id ? [{ i, id: s.template_id }] : [],
  );
  if (templated.length > 0) {
    const found = new Set(
      (
        await db<
          { id: string }[]
        >`select id from email_templates where workspace_id = ${workspaceId} and id in ${db(templated.map((t) => t.id))}`
      ).map((r) => r.id),
    );
    const issues = templated
      .filter((t) => !found.has(t.id))
      .map((t) => ({
        loc: ['body', `graph.steps.${t.i}.template_id`],
        msg: `Email template ${t.id} is not in this workspace`,
        type: 'unknown_template',
        input: t.id,
      }));
    if (issues.length > 0) throw new ValidationRefusal(issues);
  }
  if (input.audience_table_id) {
    const [table] =
      await db`select 1 from tables where id = ${input.audience_table_id} and workspace_id = ${workspaceId} and deleted_at is null`;
    if (!table) throw notFound('Audience table');
  }
  const columnIds = Object.values(input.audience_mapping ?? {}).filter((v): v is string => typeof v === 'string');
  if (columnIds.length > 0) {
    if (!input.audience_table_id) throw new ApiError('conflict', 'Column mappings need an audience table.');
    const found = await db<{ id: string }[]>`
      select id from table_columns where table_id = ${input.audience_table_id} and workspace_id = ${workspaceId} and id in ${db(columnIds)}`;
    if (found.length !== new Set(columnIds).size)
      throw new ApiError('conflict', 'A mapped column is not a column of the audience table.');
  }
  const senderIds = (input.senders ?? []).map((s) => s.sender_profile_id);
  if (new Set(senderIds).size !== senderIds.length) throw new ApiError('conflict', 'A sender is listed twice.');
  if (senderIds.length > 0) {
    const found =
      await db`select id from sender_profiles where workspace_id = ${workspaceId} and id in ${db(senderIds)}`;
    if (found.length !== senderIds.length) throw notFound('Sender profile');
  }
}

async function writeSenders(db: Db, sequenceId: string, senders: SequenceSender[]) {
  await db`delete from sequence_senders where sequence_id = ${sequenceId}`;
  if (senders.length === 0) return;
  await db`insert into sequence_senders ${db(
    senders.map((s, position) => ({
      sequence_id: sequenceId,
      sender_profile_id: s.sender_profile_id,
      from_email: s.from_email,
      from_name: s.from_name,
      position,
    })),
  )}`;
}

export async function createSequence(sql: Sql, workspaceId: string, input: SequenceCreate): Promise<Sequence> {
  checkGraph(input.graph);
  return sql.begin<Sequence>(async (tx) => {
    await checkReferences(tx, workspaceId, input);
    const [row] = await tx<SequenceRow[]>`
      insert into sequences (workspace_id, name, audience_table_id, audience_mapping, feed_new_rows, email_mode, pnet_mode, feed_cursor)
      values (${workspaceId}, ${input.name}, ${input.audience_table_id}, ${tx.json(input.audience_mapping)}, ${input.feed_new_rows},
              ${input.email_mode}, ${input.pnet_mode}, ${feedStart(tx, input.audience_table_id)})
      returning *`;
    await tx`insert into sequence_versions (sequence_id, version, graph) values (${row!.id}, 1, ${tx.json(input.graph)})`;
    await writeSenders(tx, row!.id, input.senders);
    return toSequence(tx, row!);
  });
}

export async function findSequenceRow(db: Db, workspaceId: string, sequenceId: string) {
  const [row] = await db<
    SequenceRow[]
  >`select * from sequences where id = ${sequenceId} and workspace_id = ${workspaceId}`;
  return row;
}

export async function getSequence(db: Db, workspaceId: string, sequenceId: string): Promise<Sequence | undefined> {
  const row = await findSequenceRow(db, workspaceId, sequenceId);
  return row ? toSequence(db, row) : undefined;
}

export async function listSequences(db: Db, workspaceId: string): Promise<Sequence[]> {
  const rows = await db<
    SequenceRow[]
  >`select * from sequences where workspace_id = ${workspaceId} order by created_at desc, id desc limit 500`;
  return Promise.all(rows.map((r) => toSequence(db, r)));
}

function staleRevision(current: number) {
  return new ApiError(
    'conflict',
    `The sequence changed since it was read (revision ${current} now); read it again and retry.`,
  );
}

/**
 * Edits a sequence. A new graph replaces the current version while nobody is enrolled on it;
 * once a contact started on it, the graph becomes a new version and contacts in flight stay on theirs.
 */
export async function updateSequence(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  input: SequenceUpdate,
): Promise<Sequence> {
  if (input.graph) checkGraph(input.graph);
  return sql.begin<Sequence>(async (tx) => {
    const [row] = await tx<
      SequenceRow[]
    >`select * from sequences where id = ${sequenceId} and workspace_id = ${workspaceId} for update`;
    if (!row) throw notFound('Sequence');
    if (row.revision !== input.expected_revision) throw staleRevision(row.revision);
    const tableId = input.audience_table_id !== undefined ? input.audience_table_id : row.audience_table_id;
    await checkReferences(tx, workspaceId, {
      audience_table_id: tableId,
      audience_mapping:
        input.audience_mapping ??
        (input.audience_table_id !== undefined ? undefined : AudienceMappingSchema.parse(row.audience_mapping)),
      ...(input.senders ? { senders: input.senders } : {}),
      graph: input.graph,
    });
    let version = row.current_version;
    if (input.graph) {
      const [used] =
        await tx`select 1 from sequence_contacts where sequence_id = ${sequenceId} and version = ${version} limit 1`;
      if (used) {
        version += 1;
        await tx`insert into sequence_versions (sequence_id, version, graph) values (${sequenceId}, ${version}, ${tx.json(input.graph)})`;
      } else {
        await tx`update sequence_versions set graph = ${tx.json(input.graph)}, created_at = now() where sequence_id = ${sequenceId} and version = ${version}`;
      }
    }
    if (input.senders) await writeSenders(tx, sequenceId, input.senders);
    const mapping =
      input.audience_mapping ??
      (input.audience_table_id !== undefined && input.audience_table_id !== row.audience_table_id
        ? AudienceMappingSchema.parse({})
        : row.audience_mapping);
    const [updated] = await tx<SequenceRow[]>`
      update sequences set
        name = ${input.name ?? row.name},
        audience_table_id = ${tableId},
        audience_mapping = ${tx.json(mapping)},
        feed_new_rows = ${input.feed_new_rows ?? row.feed_new_rows},
        email_mode = ${input.email_mode ?? row.email_mode},
        pnet_mode = ${input.pnet_mode ?? row.pnet_mode},
        current_version = ${version},
        -- Feeding starts with the rows that arrive from now on (switched on, or a new table).
        feed_cursor = ${(input.feed_new_rows && !row.feed_new_rows) || tableId !== row.audience_table_id ? feedStart(tx, tableId) : tx`feed_cursor`},
        revision = revision + 1,
        updated_at = now()
      where id = ${sequenceId} and revision = ${input.expected_revision}
      returning *`;
    return toSequence(tx, updated!);
  });
}

const transitions: Record<
  'launch' | 'pause' | 'resume' | 'archive',
  { from: Sequence['status'][]; to: Sequence['status'] }
> = {
  launch: { from: ['draft'], to: 'active' },
  pause: { from: ['active'], to: 'paused' },
  resume: { from: ['paused'], to: 'active' },
  archive: { from: ['draft', 'active', 'paused'], to: 'archived' },
};
export type SequenceTransition = keyof typeof transitions;

/** Moves the sequence's status with a compare-and-set on its revision; pausing holds its pnet steps too. */
export async function transitionSequence(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  action: SequenceTransition,
  expectedRevision: number,
): Promise<Sequence> {
  const { from, to } = transitions[action];
  return sql.begin<Sequence>(async (tx) => {
    const [row] = await tx<
      SequenceRow[]
    >`select * from sequences where id = ${sequenceId} and workspace_id = ${workspaceId} for update`;
    if (!row) throw notFound('Sequence');
    if (row.revision !== expectedRevision) throw staleRevision(row.revision);
    if (!from.includes(row.status)) throw new ApiError('conflict', `A ${row.status} sequence cannot ${action}.`);
    const [updated] = await tx<SequenceRow[]>`
      update sequences set status = ${to}, revision = revision + 1, updated_at = now() where id = ${sequenceId} returning *`;
    if (to === 'paused' || to === 'archived') {
      await tx`insert into pnet_step_holds (workspace_id, sequence_id, reason) values (${workspaceId}, ${sequenceId}, 'sequence_paused')
               on conflict do nothing`;
      await tx`update browser_steps set held = true, updated_at = now()
               where workspace_id = ${workspaceId} and sequence_id = ${sequenceId} and status in ('awaiting_approval', 'queued', 'resuming')`;
    } else {
      await tx`delete from pnet_step_holds where workspace_id = ${workspaceId} and sequence_id = ${sequenceId}`;
      await tx`update browser_steps set held = pnet_step_held(workspace_id, contact_key, sequence_id), updated_at = now()
               where workspace_id = ${workspaceId} and sequence_id = ${sequenceId} and status in ('awaiting_approval', 'queued', 'resuming')`;
    }
    // Archived: each contact's workflow, woken by the caller, stops it (`archived`) and cancels its waiting pnet steps.
    return toSequence(tx, updated!);
  });
}

// ---------------------------------------------------------------------------------------------
// Settings

export async function getSettings(db: Db, workspaceId: string) {
  const [row] = await db<{ recontact_cooldown_days: number }[]>`
    select coalesce((select recontact_cooldown_days from sequence_settings where workspace_id = ${workspaceId}), 30) as recontact_cooldown_days`;
  return row!;
}

export async function updateSettings(db: Db, workspaceId: string, days: number) {
  await db`insert into sequence_settings (workspace_id, recontact_cooldown_days) values (${workspaceId}, ${days})
           on conflict (workspace_id) do update set recontact_cooldown_days = excluded.recontact_cooldown_days, updated_at = now()`;
  return getSettings(db, workspaceId);
}

// ---------------------------------------------------------------------------------------------
// Enrolment

export interface Person {
  email: string | null;
  profile_url: string | null;
  /** The enrolled contact itself (its explicit stops count); null before enrolment. */
  contact_id: string | null;
  /** Replies, bounces and stops count from here: the enrolment; null: the cooldown back from now. */
  since: Date | null;
}

/**
 * Why each person must not be enrolled (or sent to) now, or null, in one round trip: the stop
 * reasons of migration 014 (the do-not-contact list always; a reply, bounce or stop since `since`),
 * another live sequence of the person, a reach by another sequence inside the recontact cooldown,
 * and, when enrolling, the same person already in this sequence under another row.
 */
export async function outreachBlocks(
  db: Db,
  workspaceId: string,
  sequenceId: string,
  people: Person[],
  enrolling: boolean,
): Promise<(string | null)[]> {
  if (people.length === 0) return [];
  const rows = await db<
    { i: number; reason: string | null }[]
  >`${outreachBlocksQuery(db, workspaceId, sequenceId, people, enrolling)}`;
  const reasons: (string | null)[] = people.map(() => null);
  for (const r of rows) reasons[r.i] = r.reason;
  return reasons;
}

/**
 * The query of outreachBlocks (rows `i`, `reason`), for a statement that must decide on the
 * same snapshot as it acts (a send's claim).
 */
export function outreachBlocksQuery(
  db: Db,
  workspaceId: string,
  sequenceId: string,
  people: Person[],
  enrolling: boolean,
) {
  return db`
    with s as (
      select coalesce((select recontact_cooldown_days from sequence_settings where workspace_id = ${workspaceId}), 30) as days
    ), w as (
      select i, normalize_email(email) as e, normalize_profile_url(profile) as p, email, profile, contact, since
      from unnest(${people.map((_, i) => i)}::int[], ${people.map((p) => p.email)}::text[], ${people.map((p) => p.profile_url)}::text[],
                  ${people.map((p) => p.contact_id)}::uuid[], ${people.map((p) => p.since?.toISOString() ?? null)}::timestamptz[])
        as x(i, email, profile, contact, since)
    )
    select w.i, coalesce(
      contact_stop_reason(${workspaceId}, w.email, w.profile, coalesce(w.since, now() - make_interval(days => s.days)), w.contact),
      case when exists (select 1 from sequence_contacts c where c.workspace_id = ${workspaceId} and normalize_email(c.email) = w.e
                          and c.sequence_id <> ${sequenceId} and c.status in ('active', 'paused', 'failed'))
             or exists (select 1 from sequence_contacts c where c.workspace_id = ${workspaceId} and normalize_profile_url(c.profile_url) = w.p
                          and c.sequence_id <> ${sequenceId} and c.status in ('active', 'paused', 'failed'))
        then 'active_elsewhere' end,
      case when exists (select 1 from sequence_contacts c where c.workspace_id = ${workspaceId} and normalize_email(c.email) = w.e
                          and c.sequence_id <> ${sequenceId} and c.last_reached_at > now() - make_interval(days => s.days))
             or exists (select 1 from sequence_contacts c where c.workspace_id = ${workspaceId} and normalize_profile_url(c.profile_url) = w.p
                          and c.sequence_id <> ${sequenceId} and c.last_reached_at > now() - make_interval(days => s.days))
        then 'recontact_cooldown' end,
      case when ${enrolling} and (
             exists (select 1 from sequence_contacts c where c.workspace_id = ${workspaceId} and normalize_email(c.email) = w.e and c.sequence_id = ${sequenceId})
             or exists (select 1 from sequence_contacts c where c.workspace_id = ${workspaceId} and normalize_profile_url(c.profile_url) = w.p and c.sequence_id = ${sequenceId}))
        then 'already_in_sequence' end
    ) as reason
    from w, s`;
}

/** The same check for one enrolled contact, right before a send. */
export async function outreachBlock(
  db: Db,
  workspaceId: string,
  who: Person & { sequence_id: string },
): Promise<string | null> {
  return (await outreachBlocks(db, workspaceId, who.sequence_id, [who], false))[0] ?? null;
}

/** The normal forms of 014's normalize_email / normalize_profile_url, for telling people apart within one request. */
const personKeys = (p: { email: string | null; profile_url: string | null }) => [
  ...(p.email ? [`e:${p.email.trim().toLowerCase()}`] : []),
  ...(p.profile_url
    ? [
        `p:${p.profile_url
          .trim()
          .toLowerCase()
          .replace(/^(https?:\/\/)?(www\.)?/, '')
          .replace(/[?#].*$/, '')
          .replace(/\/+$/, '')}`,
      ]
    : []),
];

/** Enrols rows one by one: each row gets its own answer, and one refused row never sinks the others. */
export async function enrolRows(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  rowIds: string[],
  senderProfileId: string | null,
): Promise<{ results: EnrolResult[]; started: ContactRow[] }> {
  const sequence = await findSequenceRow(sql, workspaceId, sequenceId);
  if (!sequence) throw notFound('Sequence');
  if (sequence.status === 'archived') throw new ApiError('conflict', 'An archived sequence takes no new contacts.');
  if (!sequence.audience_table_id)
    throw new ApiError('conflict', 'The sequence has no audience table to enrol rows from.');
  const senders = await sendersOf(sql, sequenceId);
  if (senderProfileId && !senders.some((s) => s.sender_profile_id === senderProfileId))
    throw new ApiError('conflict', "That sender is not one of the sequence's senders.");
  const mapping = AudienceMappingSchema.parse(sequence.audience_mapping);
  const unique = [...new Set(rowIds)];
  const rows = await sql<{ id: string; cells: Record<string, unknown> }[]>`
    select id, cells from table_rows where workspace_id = ${workspaceId} and table_id = ${sequence.audience_table_id} and id in ${sql(unique)}`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  // Reserve a block of the round-robin cursor, so concurrent enrolments still spread evenly.
  const [cursor] = await sql<{ start: number }[]>`
    update sequences set sender_cursor = sender_cursor + ${unique.length} where id = ${sequenceId} returning sender_cursor - ${unique.length} as start`;
  const answered = new Map<string, EnrolResult>();
  const existing = new Map(
    (
      await sql<
        ContactRow[]
      >`select * from sequence_contacts where sequence_id = ${sequenceId} and row_id in ${sql(unique)}`
    ).map((c) => [c.row_id, c]),
  );
  const candidates: { rowId: string; cells: Record<string, unknown>; fields: ReturnType<typeof contactFieldsOf> }[] =
    [];
  for (const rowId of unique) {
    const row = byId.get(rowId);
    const already = existing.get(rowId);
    if (already)
      answered.set(rowId, { row_id: rowId, status: 'already_enrolled', reason: null, contact: toContact(already) });
    else if (!row) answered.set(rowId, { row_id: rowId, status: 'refused', reason: 'row_not_found', contact: null });
    else {
      const fields = contactFieldsOf(row.cells, mapping);
      if (!fields.email && !fields.profile_url)
        answered.set(rowId, { row_id: rowId, status: 'refused', reason: 'no_address', contact: null });
      else candidates.push({ rowId, cells: row.cells, fields });
    }
  }
  const blocks = await outreachBlocks(
    sql,
    workspaceId,
    sequenceId,
    candidates.map((c) => ({ ...c.fields, contact_id: null, since: null })),
    true,
  );
  // The same person twice in one request: the first row enrols, the others are refused.
  const seen = new Set<string>();
  const admitted = candidates.filter((c, i) => {
    const keys = personKeys(c.fields);
    const reason = blocks[i] ?? (keys.some((k) => seen.has(k)) ? 'duplicate_person' : null);
    if (reason) answered.set(c.rowId, { row_id: c.rowId, status: 'refused', reason, contact: null });
    else keys.forEach((k) => seen.add(k));
    return !reason;
  });
  const started: ContactRow[] = [];
  if (admitted.length > 0) {
    const senderOf = (turn: number) =>
      senderProfileId ??
      (senders.length > 0 ? senders[(cursor!.start + turn) % senders.length]!.sender_profile_id : null);
    const inserted = await sql<ContactRow[]>`
      insert into sequence_contacts (workspace_id, sequence_id, row_id, contact_key, email, profile_url, first_name, last_name, company_name,
                                     fields, sender_profile_id, version)
      select ${workspaceId}, ${sequenceId}, x.row_id, x.contact_key, x.email, x.profile_url,
             x.first_name, x.last_name, x.company_name, x.fields, x.sender, (select current_version from sequences where id = ${sequenceId})
      from unnest(${admitted.map((c) => c.rowId)}::uuid[], ${admitted.map((c) => contactKeyOf(sequenceId, c.rowId))}::text[], ${admitted.map((c) => c.fields.email)}::text[], ${admitted.map((c) => c.fields.profile_url)}::text[],
                  ${admitted.map((c) => c.fields.first_name)}::text[], ${admitted.map((c) => c.fields.last_name)}::text[],
                  ${admitted.map((c) => c.fields.company_name)}::text[], ${admitted.map((c) => JSON.stringify(c.cells))}::jsonb[],
                  ${admitted.map((_, turn) => senderOf(turn))}::uuid[])
        as x(row_id, contact_key, email, profile_url, first_name, last_name, company_name, fields, sender)
      on conflict do nothing
      returning *`;
    const byRow = new Map(inserted.map((c) => [c.row_id, c]));
    const raced = admitted.filter((c) => !byRow.has(c.rowId)).map((c) => c.rowId);
    // Enrolled meanwhile by a concurrent request: answered as it stands.
    const racedRows =
      raced.length > 0
        ? await sql<
            ContactRow[]
          >`select * from sequence_contacts where sequence_id = ${sequenceId} and row_id in ${sql(raced)}`
        : [];
    for (const c of racedRows)
      answered.set(c.row_id, { row_id: c.row_id, status: 'already_enrolled', reason: null, contact: toContact(c) });
    for (const c of inserted) {
      started.push(c);
      answered.set(c.row_id, { row_id: c.row_id, status: 'enrolled', reason: null, contact: toContact(c) });
    }
  }
  return { results: rowIds.map((id) => answered.get(id)!), started };
}

export async function getContact(db: Db, workspaceId: string, sequenceId: string, contactId: string) {
  const [row] = await db<ContactRow[]>`
    select * from sequence_contacts where id = ${contactId} and sequence_id = ${sequenceId} and workspace_id = ${workspaceId}`;
  return row;
}

export async function listContacts(
  db: Db,
  workspaceId: string,
  sequenceId: string,
  q: { status?: ContactStatus | undefined; limit: number; after?: string | undefined },
) {
  const rows = await db<ContactRow[]>`
    select * from sequence_contacts
    where workspace_id = ${workspaceId} and sequence_id = ${sequenceId}
      ${q.status ? db`and status = ${q.status}` : db``}
      ${q.after ? db`and (enrolled_at, id) > (select enrolled_at, id from sequence_contacts where id = ${q.after} and sequence_id = ${sequenceId})` : db``}
    order by enrolled_at, id limit ${q.limit + 1}`;
  const page = rows.slice(0, q.limit);
  return { contacts: page.map(toContact), next_after: rows.length > q.limit ? page[page.length - 1]!.id : null };
}

export async function listVersions(db: Db, workspaceId: string, sequenceId: string) {
  const rows = await db<{ version: number; graph: SequenceGraph; created_at: Date; contacts: number }[]>`
    select v.version, v.graph, v.created_at,
           (select count(*)::int from sequence_contacts c where c.sequence_id = v.sequence_id and c.version = v.version) as contacts
    from sequence_versions v join sequences s on s.id = v.sequence_id
    where v.sequence_id = ${sequenceId} and s.workspace_id = ${workspaceId} order by v.version`;
  return rows.map((r) => ({
    version: r.version,
    graph: SequenceGraphSchema.parse(r.graph),
    created_at: r.created_at.toISOString(),
    contacts: r.contacts,
  }));
}

// ---------------------------------------------------------------------------------------------
// Contact actions from a person

/** One contact's answer to a migration; `contact` as it stands after (null when not found). */
export interface ContactMigration {
  migrated: boolean;
  reason: string | null;
  contact: ContactRow | null;
}

/**
 * Moves the contacts named to `toVersion` (operationId migrateSequenceContacts). The step is
 * matched by id (or `at_step_id`); steps a contact already had stay in `done_steps`, so its
 * workflow skips them on the new version. One transaction of three statements whatever their
 * number: the contacts locked, the version read, the movers updated. Each id is answered in the
 * request's order as it would be alone, judged by migrationOf: an id naming no contact of the
 * sequence `not_found`, one repeated reads the contact as its first mention left it
 * (`already_on_version` once moved).
 */
export async function migrateContacts(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  contactIds: string[],
  toVersion: number,
  atStepId: string | null,
): Promise<ContactMigration[]> {
  return sql.begin(async (tx) => {
    // Locked in id order, as every batch of contacts is, so two batches never deadlock.
    const locked = await tx<ContactRow[]>`
      select * from sequence_contacts
      where id = any(${[...new Set(contactIds)]}::uuid[]) and sequence_id = ${sequenceId} and workspace_id = ${workspaceId}
      order by id for update`;
    const [version] = locked.length
      ? await tx<
          { graph: SequenceGraph }[]
        >`select graph from sequence_versions where sequence_id = ${sequenceId} and version = ${toVersion}`
      : [];
    const stays = new Map<string, ContactMigration>();
    const targets = new Map<string, string>();
    for (const contact of locked) {
      const decided = migrationOf(contact, version?.graph ?? null, toVersion, atStepId);
      if ('target' in decided) targets.set(contact.id, decided.target);
      else stays.set(contact.id, { migrated: false, reason: decided.reason, contact });
    }
    const moved = targets.size
      ? await tx<ContactRow[]>`
          update sequence_contacts c set version = ${toVersion}, current_step_id = t.target,
            wait_step_id = case when t.target = c.current_step_id then c.wait_step_id end,
            revision = c.revision + 1, updated_at = now()
          from unnest(${[...targets.keys()]}::uuid[], ${[...targets.values()]}::text[]) as t(id, target)
          where c.id = t.id
          returning c.*`
      : [];
    const movedById = new Map(moved.map((c) => [c.id, c]));
    const answered = new Set<string>();
    return contactIds.map((id): ContactMigration => {
      const after = movedById.get(id);
      if (!after) return stays.get(id) ?? { migrated: false, reason: 'not_found', contact: null };
      const first = !answered.has(id);
      answered.add(id);
      return first
        ? { migrated: true, reason: null, contact: after }
        : { migrated: false, reason: 'already_on_version', contact: after };
    });
  });
}

/** One contact's migration: migrateContacts of one id. */
export async function migrateContact(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  contactId: string,
  toVersion: number,
  atStepId: string | null,
): Promise<ContactMigration> {
  const [one] = await migrateContacts(sql, workspaceId, sequenceId, [contactId], toVersion, atStepId);
  return one!;
}

/** Pause, resume or stop one contact; pausing holds its pnet steps. */
export async function setContactState(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  contactId: string,
  action: 'pause' | 'resume' | 'stop',
) {
  return sql.begin(async (tx) => {
    const [c] = await tx<ContactRow[]>`
      select * from sequence_contacts where id = ${contactId} and sequence_id = ${sequenceId} and workspace_id = ${workspaceId} for update`;
    if (!c) throw notFound('Sequence contact');
    if (action === 'pause') {
      if (c.status !== 'active') throw new ApiError('conflict', `A ${c.status} contact cannot be paused.`);
      await tx`insert into pnet_step_holds (workspace_id, contact_key, reason) values (${workspaceId}, ${c.contact_key}, 'contact_paused') on conflict do nothing`;
      await tx`update browser_steps set held = true, updated_at = now()
               where workspace_id = ${workspaceId} and contact_key = ${c.contact_key} and status in ('awaiting_approval', 'queued', 'resuming')`;
      const [row] = await tx<
        ContactRow[]
      >`update sequence_contacts set status = 'paused', revision = revision + 1, updated_at = now() where id = ${contactId} returning *`;
      return row!;
    }
    if (action === 'resume') {
      if (c.status !== 'paused') throw new ApiError('conflict', `A ${c.status} contact cannot be resumed.`);
      await tx`delete from pnet_step_holds where workspace_id = ${workspaceId} and contact_key = ${c.contact_key}`;
      await tx`update browser_steps set held = pnet_step_held(workspace_id, contact_key, sequence_id), updated_at = now()
               where workspace_id = ${workspaceId} and contact_key = ${c.contact_key} and status in ('awaiting_approval', 'queued', 'resuming')`;
      const [row] = await tx<
        ContactRow[]
      >`update sequence_contacts set status = 'active', revision = revision + 1, updated_at = now() where id = ${contactId} returning *`;
      return row!;
    }
    if (!['active', 'paused', 'failed'].includes(c.status))
      throw new ApiError('conflict', `A ${c.status} contact cannot be stopped.`);
    // Recorded as a stop of 014 too, so a send already past its own checks reads it in its transaction.
    await tx`insert into contact_stops (workspace_id, sequence_contact_id, reason) values (${workspaceId}, ${contactId}, 'stopped')`;
    await tx`update sequence_sends set status = 'stopped', reason = 'stopped', updated_at = now()
             where contact_id = ${contactId} and status in ('awaiting_approval', 'approved')`;
    const [row] = await tx<ContactRow[]>`
      update sequence_contacts set status = 'stopped', stop_reason = 'stopped', wait_reason = null, wait_until = null, finished_at = now(),
        revision = revision + 1, updated_at = now()
      where id = ${contactId} returning *`;
    await recordContactStopped(tx, [row!], 'stopped');
    return row!;
  });
}

/** A failed contact goes back to its failed step (the workflow retries the pnet step). */
export async function retryContact(sql: Sql, workspaceId: string, sequenceId: string, contactId: string) {
  const [row] = await sql<ContactRow[]>`
    update sequence_contacts set status = 'active', error = null, revision = revision + 1, updated_at = now()
    where id = ${contactId} and sequence_id = ${sequenceId} and workspace_id = ${workspaceId} and status = 'failed'
    returning *`;
  if (row) return row;
  const existing = await getContact(sql, workspaceId, sequenceId, contactId);
  if (!existing) throw notFound('Sequence contact');
  throw new ApiError('conflict', `Only a failed contact can be retried; this one is ${existing.status}.`);
}

// ---------------------------------------------------------------------------------------------
// Approval queue

interface SendRow {
  id: string;
  sequence_id: string;
  contact_id: string;
  step_id: string;
  channel: 'email' | 'pnet';
  kind: string;
  status: Approval['status'];
  reason: string | null;
  to_email: string | null;
  from_email: string | null;
  subject: string | null;
  body: string;
  edited: boolean;
  message_id: string;
  unconfirmed: boolean;
  decided_at: Date | null;
  sent_at: Date | null;
  created_at: Date;
}

export function toApproval(r: SendRow): Approval {
  return {
    id: r.id,
    sequence_id: r.sequence_id,
    contact_id: r.contact_id,
    step_id: r.step_id,
    channel: r.channel,
    kind: r.kind,
    status: r.status,
    reason: r.reason,
    to_email: r.to_email,
    from_email: r.from_email,
    subject: r.subject,
    body: r.body,
    edited: r.edited,
    message_id: r.message_id,
    unconfirmed: r.unconfirmed,
    decided_at: iso(r.decided_at),
    sent_at: iso(r.sent_at),
    created_at: r.created_at.toISOString(),
  };
}

/** Messages waiting for a person, less those a paused sequence or contact holds. */
export async function listApprovals(
  db: Db,
  workspaceId: string,
  q: { sequence_id?: string | undefined; unconfirmed: boolean; limit: number },
) {
  if (q.unconfirmed) {
    const sent = await db<SendRow[]>`
      select m.* from sequence_sends m
      where m.workspace_id = ${workspaceId} and m.status = 'sent' and m.unconfirmed
        ${q.sequence_id ? db`and m.sequence_id = ${q.sequence_id}` : db``}
      order by m.sent_at desc, m.id limit ${q.limit}`;
    return sent.map(toApproval);
  }
  const rows = await db<SendRow[]>`
    select m.* from sequence_sends m
    join sequence_contacts c on c.id = m.contact_id
    join sequences s on s.id = m.sequence_id
    where m.workspace_id = ${workspaceId} and m.status = 'awaiting_approval' and c.status = 'active' and s.status = 'active'
      ${q.sequence_id ? db`and m.sequence_id = ${q.sequence_id}` : db``}
    order by m.created_at, m.id limit ${q.limit}`;
  return rows.map(toApproval);
}

export async function getApproval(db: Db, workspaceId: string, id: string) {
  const [row] = await db<SendRow[]>`select * from sequence_sends where id = ${id} and workspace_id = ${workspaceId}`;
  return row ? toApproval(row) : undefined;
}

/** Approve (optionally with an edit) or reject: a compare-and-set on the waiting status. */
export async function decideApproval(
  db: Db,
  workspaceId: string,
  id: string,
  memberId: string | null,
  decision:
    | { approve: true; subject?: string | null | undefined; body?: string | undefined }
    | { approve: false; reason: string | null },
) {
  const [row] = decision.approve
    ? await db<SendRow[]>`
        update sequence_sends set status = 'approved',
          subject = ${decision.subject !== undefined ? decision.subject : db`subject`},
          body = ${decision.body ?? db`body`},
          edited = ${decision.subject !== undefined || decision.body !== undefined ? true : db`edited`},
          decided_by = ${memberId}, decided_at = now(), updated_at = now()
        where id = ${id} and workspace_id = ${workspaceId} and status = 'awaiting_approval' and ${decision.body ?? db`body`} <> '' returning *`
    : await db<SendRow[]>`
        update sequence_sends set status = 'rejected', reason = ${decision.reason ?? 'rejected'}, decided_by = ${memberId}, decided_at = now(), updated_at = now()
        where id = ${id} and workspace_id = ${workspaceId} and status = 'awaiting_approval' returning *`;
  if (row) return toApproval(row);
  const existing = await getApproval(db, workspaceId, id);
  if (!existing) throw notFound('Approval');
  if (existing.status === 'awaiting_approval')
    throw new ApiError('conflict', 'The message is empty: approve it with a `body`.');
  throw new ApiError('conflict', `This message is already ${existing.status}.`);
}

/** What a contact's workflow is addressed by. */
export interface ContactKeyRow {
  id: string;
  sequence_id: string;
  workspace_id: string;
  contact_key: string;
}

/** The contacts of a sequence that a transition wakes: active, paused or failed. */
export function liveContactsOf(sql: Db, sequenceId: string) {
  return sql<ContactKeyRow[]>`
    select id, sequence_id, workspace_id, contact_key from sequence_contacts
    where sequence_id = ${sequenceId} and status in ('active', 'paused', 'failed')`;
}

/** What a contact's workflow is addressed by, for one contact. */
export async function findContactKeyRow(sql: Db, contactId: string): Promise<ContactKeyRow | undefined> {
  const [c] = await sql<
    ContactKeyRow[]
  >`select id, sequence_id, workspace_id, contact_key from sequence_contacts where id = ${contactId}`;
  return c;
}

/** The outbound agent of the sequence (set by the outbound-agent routes), when the column exists. */
export async function outboundAgentOf(sql: Db, sequenceId: string): Promise<string | null> {
  const [row] = await sql<
    { agent: string | null }[]
  >`select to_jsonb(s)->>'outbound_agent_id' as agent from sequences s where id = ${sequenceId}`;
  return row?.agent ?? null;
}

/**
 * A contact's cancelled (or vanished) pnet step is let go, so a retry queues a new one: the
 * contact no longer points at it, and its send goes back to approved.
 */
export async function releaseCancelledStep(sql: Sql, contactId: string, stepId: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`update sequence_contacts set browser_step_id = null where id = ${contactId} and browser_step_id = ${stepId}`;
    await tx`update sequence_sends set status = 'approved', browser_step_id = null, updated_at = now() where browser_step_id = ${stepId} and status = 'sent'`;
  });
}

/** The first open of a sent email, by its pixel's token; unknown tokens change nothing. */
export async function recordEmailOpen(sql: Db, openToken: string): Promise<void> {
  await sql`update sequence_sends set opened_at = now(), updated_at = now() where open_token = ${openToken} and opened_at is null and status = 'sent'`;
}
