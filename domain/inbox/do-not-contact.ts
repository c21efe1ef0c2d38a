/**
 * The workspace do-not-contact list (the interface spec's What the service does): emails, whole
 * domains and profile URLs. Values are stored in the one normal form contact_stop_reason() compares
 * (migration 014), so the rules here mirror normalize_email() and normalize_profile_url() exactly.
 */
import { z } from 'zod';
import { queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

export const dncKinds = ['email', 'domain', 'profile_url'] as const;
export const DncKindSchema = z.enum(dncKinds).meta({ id: 'DoNotContactKind' });
export type DncKind = z.infer<typeof DncKindSchema>;

export const dncValueMax = 512;
export const dncBulkMax = 1000;
export const dncPageMax = 200;

/** Mirrors SQL normalize_email(): trimmed and lower-cased; empty is no email. */
export function normalizeEmail(value: string | null | undefined): string | null {
  const v = (value ?? '').trim().toLowerCase();
  return v === '' ? null : v;
}

/** Mirrors SQL normalize_profile_url(): https://www.x.com/in/Jane/?a=1 -> x.com/in/jane. */
export function normalizeProfileUrl(value: string | null | undefined): string | null {
  const v = (value ?? '')
    .trim()
    .toLowerCase()
    .replace(/^(https?:\/\/)?(www\.)?/, '')
    .replace(/[?#].*$/, '')
    .replace(/\/+$/, '');
  return v === '' ? null : v;
}

// Shapes of stored values (after normalising) and of values a single add accepts (before). Input
// patterns allow only spaces around a value: what JavaScript's trim() and a fuzzer's \s agree on.
const label = '[a-z0-9](?:[a-z0-9-]*[a-z0-9])?';
const emailShape = new RegExp(`^[^\\s@<>()",;:\\u0000]+@${label}(?:\\.${label})+$`);
const domainShape = new RegExp(`^${label}(?:\\.${label})+$`);
const profileShape = /^[^\s/?#]+\/\S+$/;
const anyCase = (source: string) => source.replaceAll('[a-z0-9', '[A-Za-z0-9');
export const emailInputPattern = new RegExp(
  `^ *[^\\s@<>()",;:\\u0000\\ufeff]+@${anyCase(label)}(?:\\.${anyCase(label)})+ *$`,
);
export const domainInputPattern = new RegExp(`^ *@?${anyCase(label)}(?:\\.${anyCase(label)})+ *$`);
export const profileUrlInputPattern =
  /^ *(?:[Hh][Tt][Tt][Pp][Ss]?:\/\/)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\/[^\s?#/\u0000\ufeff][^\s?#\u0000\ufeff]*(?:[?#][^\s\u0000\ufeff]*)? *$/;

/** What kind a bare value is, when the caller did not say: an @ is an email, a slash a profile URL. */
export function guessDncKind(raw: string): DncKind {
  const v = raw.trim();
  if (v.includes('@') && !v.startsWith('@')) return 'email';
  if (v.includes('/') && !/^(https?:\/\/)?[^/]+\/?$/i.test(v)) return 'profile_url';
  return 'domain';
}

const tooLong = { error: `longer than ${dncValueMax} characters` };

/**
 * The stored form of an entry, or why it cannot be one. A domain may be given as `@acme.com`,
 * `www.acme.com` or `https://acme.com/`: all mean the bare domain.
 */
export function normalizeDncValue(kind: DncKind, raw: string): { value: string } | { error: string } {
  if (raw.includes('\u0000')) return { error: 'contains a NUL character' };
  if (kind === 'email') {
    const v = normalizeEmail(raw);
    if (!v || !emailShape.test(v)) return { error: 'not an email address' };
    return v.length > dncValueMax ? tooLong : { value: v };
  }
  if (kind === 'domain') {
    let v = raw
      .trim()
      .toLowerCase()
      .replace(/^@/, '')
      .replace(/^https?:\/\//, '')
      .replace(/[/?#].*$/, '');
    if (/^www\..+\..+/.test(v)) v = v.slice(4);
    if (!domainShape.test(v)) return { error: 'not a domain name' };
    return v.length > dncValueMax ? tooLong : { value: v };
  }
  const v = normalizeProfileUrl(raw);
  if (!v || !profileShape.test(v)) return { error: 'not a profile URL' };
  return v.length > dncValueMax ? tooLong : { value: v };
}

export const DncEntrySchema = z
  .object({
    id: UuidSchema,
    kind: DncKindSchema,
    value: z
      .string()
      .describe(
        'Stored normalised: a lower-case email, a bare domain, or a profile URL without scheme, www, query or trailing slash',
      ),
    reason: z.string().nullable(),
    source: z.string().describe('Where it came from: `manual`, `import`, `inbox_bulk`, ...'),
    created_by: z.string().nullable().describe('The member or API key that added it'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'DoNotContactEntry' });
export type DncEntry = z.infer<typeof DncEntrySchema>;

const ReasonSchema = textSchema(0, 500).nullable().default(null);

export const DncCreateSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('email'), value: z.string().max(320).regex(emailInputPattern), reason: ReasonSchema }),
    z.object({
      kind: z.literal('domain'),
      value: z.string().max(255).regex(domainInputPattern).describe('`acme.com` or `@acme.com`'),
      reason: ReasonSchema,
    }),
    z.object({
      kind: z.literal('profile_url'),
      value: z.string().max(dncValueMax).regex(profileUrlInputPattern),
      reason: ReasonSchema,
    }),
  ])
  .meta({
    id: 'DoNotContactCreate',
    description: 'Stored normalised (lower case; a profile URL without scheme, www, query or trailing slash).',
  });
export type DncCreate = z.infer<typeof DncCreateSchema>;

export const DncBulkCreateSchema = z
  .object({
    entries: z
      .array(
        z.object({
          kind: DncKindSchema.optional().describe(
            'Guessed when omitted: a value with @ is an email, with / a profile URL, else a domain',
          ),
          value: z
            .string()
            .max(2048)
            .describe('A value that cannot be read is reported in its own result; it never sinks the others'),
        }),
      )
      .min(1)
      .max(dncBulkMax),
    reason: ReasonSchema.describe('Recorded on every entry added'),
  })
  .meta({ id: 'DoNotContactBulkCreate' });
export type DncBulkCreate = z.infer<typeof DncBulkCreateSchema>;

export const DncResultStatusSchema = z.enum(['added', 'exists', 'invalid']);

export const DncBulkResultSchema = z
  .object({
    added: z.int(),
    existing: z.int(),
    invalid: z.int(),
    results: z
      .array(
        z.object({
          index: z.int().describe('Position in the request'),
          status: DncResultStatusSchema.describe('`exists` when the list already had it (adding twice is harmless)'),
          entry: DncEntrySchema.nullable(),
          detail: z.string().nullable().describe('Why an invalid value was not added'),
        }),
      )
      .describe('One per requested entry, in request order'),
  })
  .meta({ id: 'DoNotContactBulkResult' });
export type DncBulkResult = z.infer<typeof DncBulkResultSchema>;

export const DncListQuerySchema = z.object({
  kind: DncKindSchema.optional(),
  search: textSchema(1, 200).optional().describe('Entries whose value contains this text (case-insensitive)'),
  limit: queryInteger(z.int().min(1).max(dncPageMax).default(50)),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)),
});
export type DncListQuery = z.infer<typeof DncListQuerySchema>;

export const DncListSchema = z
  .object({
    entries: z.array(DncEntrySchema).describe('Newest first'),
    total: z.int().describe('Entries matching the filter, across all pages'),
    next_offset: z.int().nullable().describe('Where the next page starts; null on the last page'),
  })
  .meta({ id: 'DoNotContactList' });

export const DncCheckQuerySchema = z.object({
  email: textSchema(1, 512).optional(),
  profile_url: textSchema(1, 2048).optional(),
});

export const DncCheckSchema = z
  .object({
    blocked: z.boolean(),
    matches: z
      .array(DncEntrySchema)
      .describe('The entries that block it: the email itself, its domain, or the profile URL'),
  })
  .meta({ id: 'DoNotContactCheck' });
