/**
 * Saved email templates (interface spec: Saved email template) and the one renderer every email and
 * pnet message of a sequence goes through. Rendering is pure: the same template, contact and sender
 * give the same text every time, so a retried step writes the very same message.
 */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema, textSchema } from '../shared/common.js';

export const segmentsMax = 200;
export const segmentTextMax = 20_000;
export const segmentOptionsMax = 20;
export const segmentOptionMax = 1000;
/** Templates a workspace keeps; the list (listEmailTemplates) returns them all. */
export const templatesMax = 1000;

/** Values a `builtin` segment can name: the contact's own fields and the sender's. */
export const builtinNames = [
  'first_name',
  'last_name',
  'full_name',
  'email',
  'company_name',
  'sender_first_name',
  'sender_last_name',
  'sender_full_name',
  'sender_email',
] as const;
export const BuiltinNameSchema = z.enum(builtinNames).meta({ id: 'TemplateBuiltin' });
export type BuiltinName = z.infer<typeof BuiltinNameSchema>;

const segmentFields = {
  text: textSchema(0, segmentTextMax).default('').describe('The text of a `text` segment'),
  builtin: BuiltinNameSchema.nullable().default(null).describe('The value a `builtin` segment names'),
  column_id: UuidSchema.nullable()
    .default(null)
    .describe('The audience-table column a `column` segment reads, by id, so renaming never rewrites the template'),
  options: z
    .array(textSchema(0, segmentOptionMax))
    .max(segmentOptionsMax)
    .default([])
    .describe(
      'For a `text` segment: alternatives, one picked per contact (the same one every time for that contact). ' +
        'For `builtin` and `column`: fallbacks picked the same way when the value is empty.',
    ),
  required: z
    .boolean()
    .default(false)
    .describe(
      'When the segment has no value (and no fallback), the message waits for a person instead of going out with a gap',
    ),
};

/** One segment; `kind` says which field it reads (a builtin segment names its builtin, a column segment its column). */
export const TemplateSegmentSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('text').describe('Written as is (or one of its options)'), ...segmentFields }),
    z.object({
      kind: z.literal('builtin').describe('A named value of the contact or sender'),
      ...segmentFields,
      builtin: BuiltinNameSchema,
    }),
    z.object({
      kind: z.literal('column').describe('A cell of the audience row'),
      ...segmentFields,
      column_id: UuidSchema.describe(
        'The audience-table column it reads, by id, so renaming never rewrites the template',
      ),
    }),
  ])
  .meta({ id: 'TemplateSegment' });
export type TemplateSegment = z.infer<typeof TemplateSegmentSchema>;
export type TemplateSegmentInput = z.input<typeof TemplateSegmentSchema>;

export const SegmentsSchema = z.array(TemplateSegmentSchema).max(segmentsMax);

export const TemplateScopeSchema = z.enum(['sequence_step']).meta({ id: 'TemplateScope' });

export const EmailTemplateSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    scope: TemplateScopeSchema,
    subject_segments: z.array(TemplateSegmentSchema),
    body_segments: z.array(TemplateSegmentSchema),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'EmailTemplate', description: 'A saved email template (2.7)' });
export type EmailTemplate = z.infer<typeof EmailTemplateSchema>;

export const EmailTemplateListSchema = z
  .object({ templates: z.array(EmailTemplateSchema).describe('Newest first') })
  .meta({ id: 'EmailTemplateList' });

export const EmailTemplateCreateSchema = z
  .strictObject({
    name: NameSchema,
    scope: TemplateScopeSchema.default('sequence_step'),
    subject_segments: SegmentsSchema.default([]),
    body_segments: SegmentsSchema.default([]),
  })
  .meta({ id: 'EmailTemplateCreate' });
export type EmailTemplateCreate = z.infer<typeof EmailTemplateCreateSchema>;

export const EmailTemplateUpdateSchema = z
  .strictObject({
    name: NameSchema.optional(),
    subject_segments: SegmentsSchema.optional(),
    body_segments: SegmentsSchema.optional(),
  })
  .meta({ id: 'EmailTemplateUpdate', description: 'Fields left out keep their value' });
export type EmailTemplateUpdate = z.infer<typeof EmailTemplateUpdateSchema>;

// ---------------------------------------------------------------------------------------------
// Rendering

/** What a message is written from: the contact, its audience row and its sender. */
export interface RenderContext {
  /** Picks options deterministically per contact (the sequence contact key). */
  contactKey: string;
  contact: {
    first_name?: string | null;
    last_name?: string | null;
    email?: string | null;
    company_name?: string | null;
  };
  sender: { name?: string | null; email?: string | null };
  /** The audience row's cells by column id. */
  columns: Record<string, unknown>;
}

export type RenderResult = { ok: true; text: string } | { ok: false; text: string; missing: string[] };

/** FNV-1a: a small stable hash, the same in every process and every release. */
function hash(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

const pick = (options: string[], contactKey: string, salt: string) =>
  options[hash(`${contactKey}|${salt}`) % options.length]!;

const splitName = (name: string | null | undefined) => {
  const parts = (name ?? '').trim().split(/\s+/).filter(Boolean);
  return { first: parts[0] ?? '', last: parts.slice(1).join(' ') };
};

function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value.trim();
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

export function builtinValue(name: BuiltinName, ctx: RenderContext): string {
  const c = ctx.contact;
  const sender = splitName(ctx.sender.name);
  switch (name) {
    case 'first_name':
      return (c.first_name ?? '').trim();
    case 'last_name':
      return (c.last_name ?? '').trim();
    case 'full_name':
      return [c.first_name, c.last_name]
        .map((v) => (v ?? '').trim())
        .filter(Boolean)
        .join(' ');
    case 'email':
      return (c.email ?? '').trim();
    case 'company_name':
      return (c.company_name ?? '').trim();
    case 'sender_first_name':
      return sender.first;
    case 'sender_last_name':
      return sender.last;
    case 'sender_full_name':
      return (ctx.sender.name ?? '').trim();
    case 'sender_email':
      return (ctx.sender.email ?? '').trim();
  }
}

/**
 * Renders segments for one contact. A required segment left empty is named in `missing` and the
 * caller holds the message for a person; the partial text is kept for them to edit.
 */
export function renderSegments(segments: TemplateSegmentInput[], ctx: RenderContext, salt = ''): RenderResult {
  const missing: string[] = [];
  let text = '';
  segments.forEach((raw, index) => {
    const s = TemplateSegmentSchema.parse(raw);
    let value: string;
    if (s.kind === 'text') {
      value = s.options.length > 0 ? pick(s.options, ctx.contactKey, `${salt}:${index}`) : s.text;
    } else {
      value =
        s.kind === 'builtin'
          ? s.builtin
            ? builtinValue(s.builtin, ctx)
            : ''
          : s.column_id
            ? cellText(ctx.columns[s.column_id])
            : '';
      if (value === '' && s.options.length > 0) value = pick(s.options, ctx.contactKey, `${salt}:${index}`);
    }
    if (value === '' && s.required)
      missing.push(
        s.kind === 'builtin'
          ? `builtin:${s.builtin ?? ''}`
          : s.kind === 'column'
            ? `column:${s.column_id ?? ''}`
            : `text:${index}`,
      );
    text += value;
  });
  return missing.length > 0 ? { ok: false, text, missing } : { ok: true, text };
}

/** Subject and body together: the message is ready only when neither misses a required value. */
export function renderMessage(
  template: { subject_segments: TemplateSegmentInput[]; body_segments: TemplateSegmentInput[] },
  ctx: RenderContext,
): { subject: string; body: string; missing: string[] } {
  const subject = renderSegments(template.subject_segments, ctx, 'subject');
  const body = renderSegments(template.body_segments, ctx, 'body');
  return {
    subject: subject.text,
    body: body.text,
    missing: [...(subject.ok ? [] : subject.missing), ...(body.ok ? [] : body.missing)],
  };
}
