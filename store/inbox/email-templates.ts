/** Queries of saved email templates (interface spec: Saved email template), scoped to the caller's workspace. */
import type { Db } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import {
  templatesMax,
  type EmailTemplate,
  type EmailTemplateCreate,
  type EmailTemplateUpdate,
  type TemplateSegment,
} from '../../domain/inbox/email-templates.js';

interface TemplateRow {
  id: string;
  name: string;
  scope: 'sequence_step';
  subject_segments: TemplateSegment[];
  body_segments: TemplateSegment[];
  created_at: Date;
  updated_at: Date;
}

const toTemplate = (r: TemplateRow): EmailTemplate => ({
  id: r.id,
  name: r.name,
  scope: r.scope,
  subject_segments: r.subject_segments,
  body_segments: r.body_segments,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/** Column segments must name columns of this workspace (by id); an unknown one is 404, naming it. */
export async function checkSegmentColumns(
  db: Db,
  workspaceId: string,
  body: { subject_segments?: TemplateSegment[] | undefined; body_segments?: TemplateSegment[] | undefined },
): Promise<void> {
  const ids = new Set<string>();
  for (const s of [...(body.subject_segments ?? []), ...(body.body_segments ?? [])])
    if (s.kind === 'column' && s.column_id) ids.add(s.column_id);
  if (ids.size === 0) return;
  const found = new Set(
    (
      await db<
        { id: string }[]
      >`select id from table_columns where workspace_id = ${workspaceId} and id in ${db([...ids])}`
    ).map((r) => r.id),
  );
  const missing = [...ids].filter((id) => !found.has(id));
  if (missing.length > 0) throw new ApiError('not_found', `Column ${missing.join(', ')} not found in this workspace.`);
}

export async function createTemplate(db: Db, workspaceId: string, input: EmailTemplateCreate): Promise<EmailTemplate> {
  const [row] = await db<TemplateRow[]>`
    insert into email_templates (workspace_id, name, scope, subject_segments, body_segments)
    select ${workspaceId}, ${input.name}, ${input.scope}, ${db.json(input.subject_segments)}, ${db.json(input.body_segments)}
    where (select count(*) from email_templates where workspace_id = ${workspaceId}) < ${templatesMax}
    returning *`;
  if (!row) throw new ApiError('conflict', `A workspace keeps at most ${templatesMax} templates; delete one first.`);
  return toTemplate(row);
}

export async function listTemplates(db: Db, workspaceId: string): Promise<EmailTemplate[]> {
  const rows = await db<TemplateRow[]>`
    select * from email_templates where workspace_id = ${workspaceId} order by created_at desc, id desc limit ${templatesMax}`;
  return rows.map(toTemplate);
}

export async function getTemplate(db: Db, workspaceId: string, id: string): Promise<EmailTemplate | undefined> {
  const [row] = await db<
    TemplateRow[]
  >`select * from email_templates where id = ${id} and workspace_id = ${workspaceId}`;
  return row ? toTemplate(row) : undefined;
}

export async function updateTemplate(
  db: Db,
  workspaceId: string,
  id: string,
  input: EmailTemplateUpdate,
): Promise<EmailTemplate | undefined> {
  const [row] = await db<TemplateRow[]>`
    update email_templates set
      name = ${input.name ?? db`name`},
      subject_segments = ${input.subject_segments ? db.json(input.subject_segments) : db`subject_segments`},
      body_segments = ${input.body_segments ? db.json(input.body_segments) : db`body_segments`},
      updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId}
    returning *`;
  return row ? toTemplate(row) : undefined;
}

export async function deleteTemplate(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`delete from email_templates where id = ${id} and workspace_id = ${workspaceId} returning id`;
  return rows.length > 0;
}
