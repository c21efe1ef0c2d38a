/**
 * Business-context documents (interface spec: AI business context documents, Reference document
 * status): the row, its processing runs and their extracted text. Every write a processing run
 * makes is a compare-and-set on (status, run), so a retried or stale activity changes nothing, and
 * `ready` and `failed` are written once per run. People reach a document by workspace; processing
 * goes by id.
 */
import { transaction, type Db, type Sql } from '../../db/sql.js';
import { recordWorkspaceEvent, withinTransaction } from '../notifications/outbox.js';
import {
  inPromptBudget,
  promptDocuments,
  type BusinessDocument,
  type DocumentStatus,
  type DocumentStep,
} from '../../domain/documents/documents.js';

interface DocumentRow {
  id: string;
  workspace_id: string;
  source: 'upload' | 'cloud_drive';
  status: DocumentStatus;
  error: string | null;
  title: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  summary: string | null;
  summary_edited: boolean;
  summary_generated_at: Date | null;
  summary_source: string | null;
  included_in_context: boolean;
  drive_file_id: string | null;
  drive_web_view_link: string | null;
  steps: DocumentStep[];
  run: number;
  created_at: Date;
  updated_at: Date;
}

/** A document with its workspace, run and summary writer (the API shows the rest). */
export type DocumentRecord = Omit<BusinessDocument, 'in_prompt_budget'> & {
  workspace_id: string;
  run: number;
  summary_source: string | null;
};

const columns = [
  'id',
  'workspace_id',
  'source',
  'status',
  'error',
  'title',
  'filename',
  'content_type',
  'size_bytes',
  'summary',
  'summary_edited',
  'summary_generated_at',
  'summary_source',
  'included_in_context',
  'drive_file_id',
  'drive_web_view_link',
  'steps',
  'run',
  'created_at',
  'updated_at',
];

const toRecord = (r: DocumentRow): DocumentRecord => ({
  id: r.id,
  workspace_id: r.workspace_id,
  source: r.source,
  status: r.status,
  error: r.error,
  title: r.title,
  filename: r.filename,
  content_type: r.content_type,
  size_bytes: r.size_bytes,
  summary: r.summary,
  summary_edited: r.summary_edited,
  summary_generated_at: r.summary_generated_at?.toISOString() ?? null,
  summary_source: r.summary_source,
  included_in_context: r.included_in_context,
  drive_file_id: r.drive_file_id,
  drive_web_view_link: r.drive_web_view_link,
  steps: r.steps,
  run: r.run,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

export interface NewDocument {
  title: string;
  filename: string;
  contentType: string;
  content: Buffer;
}

/**
 * The upload, `pending`, committed before its workflow starts; 'full' when the workspace already
 * keeps `maxDocuments` (counted with the workspace row locked, so two uploads cannot both take the last place).
 */
export async function insertDocument(
  sql: Sql,
  workspaceId: string,
  input: NewDocument,
  maxDocuments: number,
): Promise<DocumentRecord | 'full'> {
  return transaction(sql, async (tx) => {
    await tx`select 1 from workspaces where id = ${workspaceId} for update`;
    const [counted] = await tx<
      { count: number }[]
    >`select count(*)::int as count from business_documents where workspace_id = ${workspaceId}`;
    if ((counted?.count ?? 0) >= maxDocuments) return 'full' as const;
    const [row] = await tx<DocumentRow[]>`
      insert into business_documents (workspace_id, source, title, filename, content_type, size_bytes, content)
      values (${workspaceId}, 'upload', ${input.title}, ${input.filename}, ${input.contentType}, ${input.content.length}, ${input.content})
      returning ${tx(columns)}`;
    return toRecord(row!);
  });
}

/** The workspace's documents, oldest first. */
export async function listDocuments(db: Db, workspaceId: string): Promise<DocumentRecord[]> {
  const rows = await db<DocumentRow[]>`
    select ${db(columns)} from business_documents where workspace_id = ${workspaceId} order by created_at, id`;
  return rows.map(toRecord);
}

export async function getDocument(db: Db, workspaceId: string, id: string): Promise<DocumentRecord | undefined> {
  const [row] = await db<
    DocumentRow[]
  >`select ${db(columns)} from business_documents where id = ${id} and workspace_id = ${workspaceId}`;
  return row ? toRecord(row) : undefined;
}

/** The list with each document's `in_prompt_budget`. */
export function withBudget(
  documents: DocumentRecord[],
  maxChars: number,
): (DocumentRecord & { in_prompt_budget: boolean })[] {
  const budget = inPromptBudget(documents, maxChars);
  return documents.map((d) => ({ ...d, in_prompt_budget: budget.get(d.id) ?? true }));
}

export interface DocumentPatch {
  included_in_context?: boolean;
  /** A string saves it by hand; null clears it (and it is generated again). */
  summary?: string | null;
  title?: string;
}

/** A tri-state patch: a field left out keeps its value. */
export async function updateDocument(
  db: Db,
  workspaceId: string,
  id: string,
  patch: DocumentPatch,
): Promise<DocumentRecord | undefined> {
  const has = (key: keyof DocumentPatch) => Object.hasOwn(patch, key) && patch[key] !== undefined;
  const summarySet = Object.hasOwn(patch, 'summary') && patch.summary !== undefined;
  const [row] = await db<DocumentRow[]>`
    update business_documents set
      included_in_context = ${has('included_in_context') ? db`${patch.included_in_context!}` : db`included_in_context`},
      title = ${has('title') ? db`${patch.title!}` : db`title`},
      summary = ${summarySet ? db`${patch.summary ?? null}` : db`summary`},
      summary_edited = ${summarySet ? db`${patch.summary !== null}` : db`summary_edited`},
      summary_source = ${summarySet ? (patch.summary === null ? db`null` : db`'edited'`) : db`summary_source`},
      summary_generated_at = ${summarySet && patch.summary === null ? db`null` : db`summary_generated_at`},
      -- A summary saved by hand while a run asked to regenerate is the one kept.
      regenerate_summary = ${summarySet && patch.summary !== null ? db`false` : db`regenerate_summary`},
      updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId}
    returning ${db(columns)}`;
  return row ? toRecord(row) : undefined;
}

export async function deleteDocument(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`delete from business_documents where id = ${id} and workspace_id = ${workspaceId} returning id`;
  return rows.length > 0;
}

/**
 * A new processing run, if the document has settled (ready or failed): `pending` again, steps
 * empty, the run counted up. 'busy' while a run is under way (a second re-read at once finds this).
 */
export async function startRerun(
  db: Db,
  workspaceId: string,
  id: string,
  regenerateSummary: boolean,
): Promise<DocumentRecord | 'busy' | undefined> {
  const [row] = await db<DocumentRow[]>`
    update business_documents set status = 'pending', error = null, steps = '[]'::jsonb, run = run + 1,
      regenerate_summary = ${regenerateSummary}, updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId} and status in ('ready', 'failed')
    returning ${db(columns)}`;
  if (row) return toRecord(row);
  return (await getDocument(db, workspaceId, id)) ? 'busy' : undefined;
}

export interface RunDocument {
  id: string;
  workspace_id: string;
  source: 'upload' | 'cloud_drive';
  drive_file_id: string | null;
  status: DocumentStatus;
  run: number;
  filename: string;
  content_type: string;
  content: Buffer | null;
  summary_edited: boolean;
  regenerate_summary: boolean;
}

/** Takes the run's document from pending to processing (a retry finds it processing already); null when the run is over or superseded. */
export async function beginRun(db: Db, id: string, run: number): Promise<RunDocument | null> {
  const [row] = await db<RunDocument[]>`
    update business_documents set status = 'processing', updated_at = now()
    where id = ${id} and run = ${run} and status in ('pending', 'processing')
    returning id, workspace_id, source, drive_file_id, status, run, filename, content_type, content, summary_edited, regenerate_summary`;
  return row ?? null;
}

/** Adds a step to the run's list, once per step name, at most 40; false when the run is no longer processing. */
export async function appendStep(db: Db, id: string, run: number, entry: DocumentStep): Promise<boolean> {
  const rows = await db`
    update business_documents set steps = steps || ${db.json([entry] as never)}::jsonb, updated_at = now()
    where id = ${id} and run = ${run} and status = 'processing' and jsonb_array_length(steps) < 40
      and not steps @> ${db.json([{ name: entry.name }] as never)}::jsonb
    returning id`;
  return rows.length > 0;
}

/** Replaces the document's text with this run's chunks (only while the run is processing). */
export async function saveChunks(sql: Sql, id: string, run: number, chunks: string[]): Promise<boolean> {
  return transaction(sql, async (tx) => {
    const [row] =
      await tx`select 1 from business_documents where id = ${id} and run = ${run} and status = 'processing' for update`;
    if (!row) return false;
    await tx`delete from business_document_chunks where document_id = ${id}`;
    if (chunks.length) {
      await tx`insert into business_document_chunks ${tx(chunks.map((text, chunk_index) => ({ document_id: id, chunk_index, text })))}`;
    }
    return true;
  });
}

export async function readChunks(db: Db, id: string): Promise<string[]> {
  const rows = await db<
    { text: string }[]
  >`select text from business_document_chunks where document_id = ${id} order by chunk_index`;
  return rows.map((r) => r.text);
}

/**
 * The run ends `ready`, once: the summary is written unless a person edited it and the run was not
 * asked to regenerate; the upload's bytes are dropped. Null when the run was not processing (done already, or superseded).
 */
export async function finishRun(
  db: Db,
  id: string,
  run: number,
  summary: { text: string; source: string } | null,
): Promise<DocumentRecord | null> {
  return withinTransaction(db, (tx) => finishRunIn(tx, id, run, summary));
}

async function finishRunIn(
  db: Db,
  id: string,
  run: number,
  summary: { text: string; source: string } | null,
): Promise<DocumentRecord | null> {
  const [row] = await db<DocumentRow[]>`
    update business_documents set status = 'ready', error = null, content = null, updated_at = now(),
      summary = case when summary_edited and not regenerate_summary then summary else ${summary?.text ?? null} end,
      summary_source = case when summary_edited and not regenerate_summary then summary_source else ${summary?.source ?? null} end,
      summary_generated_at = case when summary_edited and not regenerate_summary then summary_generated_at else now() end,
      summary_edited = summary_edited and not regenerate_summary,
      regenerate_summary = false
    where id = ${id} and run = ${run} and status = 'processing'
    returning ${db(columns)}`;
  if (row)
    await recordWorkspaceEvent(db, {
      workspaceId: row.workspace_id,
      type: 'document.ready',
      payload: { document_id: row.id, title: row.title },
    });
  return row ? toRecord(row) : null;
}

/** The run ends `failed` with a reason a person can act on, once; the bytes are dropped. */
export async function failRun(db: Db, id: string, run: number, error: string): Promise<DocumentRecord | null> {
  return withinTransaction(db, (tx) => failRunIn(tx, id, run, error));
}

async function failRunIn(db: Db, id: string, run: number, error: string): Promise<DocumentRecord | null> {
  const [row] = await db<DocumentRow[]>`
    update business_documents set status = 'failed', error = ${error}, content = null, regenerate_summary = false, updated_at = now()
    where id = ${id} and run = ${run} and status in ('pending', 'processing')
    returning ${db(columns)}`;
  if (row)
    await recordWorkspaceEvent(db, {
      workspaceId: row.workspace_id,
      type: 'document.failed',
      payload: { document_id: row.id, title: row.title, error },
    });
  return row ? toRecord(row) : null;
}

/** A document made from text the service wrote (a company's site read from its domain), `pending` like an upload. */
export async function insertGeneratedDocument(
  sql: Sql,
  workspaceId: string,
  input: NewDocument,
  maxDocuments: number,
): Promise<DocumentRecord | 'full'> {
  return insertDocument(sql, workspaceId, input, maxDocuments);
}

/**
 * The business context one prompt reads: the included ready summaries that fit `maxChars`, oldest
 * first, with their titles.
 */
export async function businessContext(
  db: Db,
  workspaceId: string,
  maxChars: number,
): Promise<{ title: string; summary: string }[]> {
  const rows = await db<
    {
      id: string;
      title: string;
      summary: string;
      status: DocumentStatus;
      included_in_context: boolean;
      created_at: Date;
    }[]
  >`
    select id, title, summary, status, included_in_context, created_at from business_documents
    where workspace_id = ${workspaceId} and status = 'ready' and included_in_context and summary is not null
    order by created_at, id`;
  return promptDocuments(rows, maxChars).map((d) => ({ title: d.title, summary: d.summary }));
}

/**
 * One `pending` document per drive file, in the order picked, all or none: 'full' when they would
 * take the workspace past `maxDocuments` (counted with the workspace row locked).
 */
export async function insertDriveDocuments(
  sql: Sql,
  workspaceId: string,
  fileIds: string[],
  maxDocuments: number,
): Promise<DocumentRecord[] | 'full'> {
  return transaction(sql, async (tx) => {
    await tx`select 1 from workspaces where id = ${workspaceId} for update`;
    const [counted] = await tx<
      { count: number }[]
    >`select count(*)::int as count from business_documents where workspace_id = ${workspaceId}`;
    if ((counted?.count ?? 0) + fileIds.length > maxDocuments) return 'full' as const;
    const made: DocumentRecord[] = [];
    for (const fileId of fileIds) {
      const [row] = await tx<DocumentRow[]>`
        insert into business_documents (workspace_id, source, title, filename, content_type, size_bytes, drive_file_id)
        values (${workspaceId}, 'cloud_drive', ${fileId}, ${fileId}, 'application/octet-stream', 0, ${fileId})
        returning ${tx(columns)}`;
      made.push(toRecord(row!));
    }
    return made;
  });
}

/** What reading a drive file learned of it: its name, type, size and link (the run's, while it is processing). */
export async function recordDriveFile(
  db: Db,
  id: string,
  run: number,
  file: { name: string; contentType: string; size: number; webViewLink: string | null },
): Promise<void> {
  await db`
    update business_documents set title = ${file.name.slice(0, 255) || 'Untitled'}, filename = ${file.name.slice(0, 255) || 'untitled'},
      content_type = ${file.contentType}, size_bytes = ${file.size}, drive_web_view_link = ${file.webViewLink}, updated_at = now()
    where id = ${id} and run = ${run} and status = 'processing'`;
}
