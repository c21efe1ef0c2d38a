/**
 * AI business-context documents (decision 035; interface spec: AI business context documents,
 * Reference document status, Limits): the schemas of a document, its list and its requests, and the
 * pure rules: which summaries fit one prompt's budget (oldest first), how long text is cut into
 * chunks, and the local extractive summariser used when no chat model is configured (it says it is
 * an extract, never passing for a model's summary).
 */
import { z } from 'zod';
import { TimestampSchema, UuidSchema, lineSchema, noControlCharacters, textSchema } from '../shared/common.js';

export const summaryMax = 2000;
export const titleMax = 255;
export const stepsMax = 40;
/** How many documents a workspace keeps, and the characters of summaries one prompt reads (DOCUMENTS_MAX, DOCUMENT_CONTEXT_CHARS). */
export const documentsMaxDefault = 25;
export const contextCharsDefault = 12_000;
/** The largest upload (DOCUMENT_MAX_BYTES). */
export const documentBytesMaxDefault = 10 * 1024 * 1024;
/** Characters of text per chunk a summary is built from. */
export const chunkChars = 8_000;

export interface BusinessDocumentLimits {
  maxDocuments: number;
  contextChars: number;
  maxUploadBytes: number;
}
export const defaultBusinessDocumentLimits: BusinessDocumentLimits = {
  maxDocuments: documentsMaxDefault,
  contextChars: contextCharsDefault,
  maxUploadBytes: documentBytesMaxDefault,
};

export const DocumentSourceSchema = z.enum(['upload', 'cloud_drive']);
export const DocumentStatusSchema = z.enum(['pending', 'processing', 'ready', 'failed']);
export type DocumentStatus = z.infer<typeof DocumentStatusSchema>;
export const ConfidenceSchema = z.enum(['high', 'medium', 'low']);
export type Confidence = z.infer<typeof ConfidenceSchema>;

export const DocumentStepSchema = z.object({
  name: z.string(),
  detail: z.string().nullable(),
  started_at: TimestampSchema,
  finished_at: TimestampSchema,
  duration_ms: z.int().min(0),
});
export type DocumentStep = z.infer<typeof DocumentStepSchema>;

export const TitleSchema = z.string().min(1).max(titleMax);
export const SummarySchema = z.string().max(summaryMax);

export const BusinessDocumentSchema = z
  .object({
    id: UuidSchema,
    source: DocumentSourceSchema,
    status: DocumentStatusSchema.describe(
      'pending (committed before its workflow starts), processing, then ready or failed; ready and failed stay until a re-read',
    ),
    error: z.string().nullable().describe('Why processing failed, and what to do about it; null unless failed'),
    title: TitleSchema,
    filename: z.string(),
    content_type: z.string(),
    size_bytes: z.int().min(0),
    summary: SummarySchema.nullable().describe(
      `Markdown, at most ${summaryMax} characters; null until generated or after a clear`,
    ),
    summary_edited: z
      .boolean()
      .describe('True once a person saved the summary; a re-read keeps it unless asked to regenerate'),
    summary_generated_at: TimestampSchema.nullable(),
    included_in_context: z.boolean(),
    drive_file_id: z.string().nullable(),
    drive_web_view_link: z.string().nullable(),
    in_prompt_budget: z
      .boolean()
      .describe(
        "Whether this document's summary fits the prompt's budget, counted oldest first over included ready summaries; a single read reports true",
      ),
    steps: z
      .array(DocumentStepSchema)
      .max(stepsMax)
      .describe(`What processing did, in order (at most ${stepsMax}); restarts empty on a re-read`),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'BusinessDocument' });
export type BusinessDocument = z.infer<typeof BusinessDocumentSchema>;

export const BusinessDocumentListSchema = z
  .object({
    documents: z.array(BusinessDocumentSchema),
    max_documents: z.int().min(1).describe('How many documents a workspace may keep'),
    max_context_chars: z
      .int()
      .min(1)
      .describe('Characters of included summaries one prompt reads, oldest document first'),
  })
  .meta({ id: 'BusinessDocumentList' });

export const UpdateBusinessDocumentSchema = z
  .object({
    included_in_context: z.boolean().optional(),
    summary: textSchema(0, summaryMax)
      .nullable()
      .optional()
      .describe('A summary written by hand (sets summary_edited), or null to clear it and generate it again'),
    title: lineSchema(1, titleMax).optional(),
  })
  .strict();
export type UpdateBusinessDocument = z.infer<typeof UpdateBusinessDocumentSchema>;

export const RereadRequestSchema = z.object({ regenerate_summary: z.boolean().optional() }).strict();

/** A bare company domain: labels of letters, digits and hyphens, a dot between, no scheme, path, port or IP address. */
export const DomainSchema = z
  .string()
  .min(3)
  .max(253)
  .regex(noControlCharacters, 'must not contain control characters')
  .transform((value) => value.trim().toLowerCase().replace(/\.$/, ''))
  .refine((value) => /^(?=.{3,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/.test(value), {
    message: 'Give a bare company domain such as example.com: no scheme, path, port or IP address',
  })
  .refine((value) => !/^[0-9.]+$/.test(value) && !/\.[0-9]+$/.test(value), {
    message: 'An IP address is not a company domain',
  });
export const GenerateRequestSchema = z.object({ domain: DomainSchema }).strict();

// ---------------------------------------------------------------------------------------------
// The prompt's budget.

export interface BudgetEntry {
  id: string;
  status: DocumentStatus;
  included_in_context: boolean;
  summary: string | null;
  created_at: string | Date;
}

const time = (value: string | Date) => (typeof value === 'string' ? Date.parse(value) : value.getTime());

/**
 * Which documents' summaries one prompt reads: included ready documents with a summary, oldest
 * first (ties by id), while their summaries' characters stay within `maxChars`; the first one past
 * it and every later one are out. A document the prompt would not read anyway (excluded, not ready,
 * no summary) counts as in budget (the spec's default true). Answers by id.
 */
export function inPromptBudget(documents: BudgetEntry[], maxChars: number): Map<string, boolean> {
  const result = new Map<string, boolean>();
  const candidates = documents
    .filter((d) => d.included_in_context && d.status === 'ready' && d.summary)
    .sort((a, b) => time(a.created_at) - time(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const d of documents) result.set(d.id, true);
  let used = 0;
  let full = false;
  for (const d of candidates) {
    used += d.summary!.length;
    if (full || used > maxChars) {
      full = true;
      result.set(d.id, false);
    }
  }
  return result;
}

/** The documents one prompt reads, in the order it reads them (oldest first). */
export function promptDocuments<T extends BudgetEntry>(documents: T[], maxChars: number): T[] {
  const budget = inPromptBudget(documents, maxChars);
  return documents
    .filter((d) => d.included_in_context && d.status === 'ready' && d.summary && budget.get(d.id))
    .sort((a, b) => time(a.created_at) - time(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

// ---------------------------------------------------------------------------------------------
// Text.

/** Text as one clean string: line ends unified, control characters dropped, runs of blank lines cut to one. */
export function normaliseText(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '')
    .replace(/[ \t]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * Cuts text into chunks of at most `size` characters, each ending at a paragraph break, else a line
 * break, else a sentence end, else a space, in its last half when there is one; a word longer than
 * that is cut where it must be. Joined with nothing between, the chunks are the text.
 */
export function chunkText(text: string, size = chunkChars): string[] {
  if (size < 1) throw new RangeError('A chunk holds at least one character.');
  const chunks: string[] = [];
  let rest = text;
  while (rest.length > size) {
    const window = rest.slice(0, size);
    const floor = Math.floor(size / 2);
    let cut = -1;
    for (const mark of ['\n\n', '\n', '. ', ' ']) {
      const at = window.lastIndexOf(mark);
      if (at >= floor) {
        cut = at + mark.length;
        break;
      }
    }
    if (cut <= 0) cut = size;
    chunks.push(rest.slice(0, cut));
    rest = rest.slice(cut);
  }
  if (rest.length > 0 || chunks.length === 0) chunks.push(rest);
  return chunks;
}

/** What the summary records as its writer: the model's key, or the local extract. */
export const localSummarySource = 'local-extractive';
export const modelSummarySource = (key: string) => `model:${key}`;
/** The first line of every local summary, so nobody takes it for a model's. */
export const localSummaryHeading =
  '_Extract (no model configured): sentences taken as written from the document, not a written summary._';

const stopWords = new Set(
  'a an and are as at be but by for from has have in into is it its of on or our that the their this to was we were which will with you your they them not can more than'.split(
    ' ',
  ),
);

/** Sentences of the text, each on one line, in order. */
export function sentences(text: string): string[] {
  return normaliseText(text)
    .split(/\n+/)
    .flatMap((line) => line.replace(/^[#>*\-\s\d.]+(?=\S)/, '').split(/(?<=[.!?])\s+(?=[A-Z0-9"'(])/))
    .map((s) => s.replace(/\s+/g, ' ').trim())
    .filter((s) => s.length >= 20 && /[a-z]/i.test(s));
}

/**
 * The local extractive summary: the heading line, then the sentences that carry the text's most
 * frequent words (stop words aside), earlier sentences winning ties, listed in the document's order,
 * each as written, within `maxChars` in all. Null when the text has no sentence to take.
 */
export function extractiveSummary(text: string, maxChars = 1200): string | null {
  const all = sentences(text);
  if (all.length === 0) return null;
  const words = (s: string) => s.toLowerCase().match(/[a-z0-9][a-z0-9'-]*/g) ?? [];
  const counts = new Map<string, number>();
  for (const s of all)
    for (const w of new Set(words(s))) if (!stopWords.has(w) && w.length > 2) counts.set(w, (counts.get(w) ?? 0) + 1);
  const scored = all.map((s, index) => {
    const ws = words(s).filter((w) => !stopWords.has(w) && w.length > 2);
    const score = ws.length ? ws.reduce((sum, w) => sum + (counts.get(w) ?? 0), 0) / Math.sqrt(ws.length) : 0;
    return { s: s.length > 400 ? `${s.slice(0, 399)}…` : s, index, score: score + (index === 0 ? 1 : 0) };
  });
  const budget = Math.min(maxChars, summaryMax) - localSummaryHeading.length - 1;
  const chosen: typeof scored = [];
  let used = 0;
  const seen = new Set<string>();
  for (const item of [...scored].sort((a, b) => b.score - a.score || a.index - b.index)) {
    const line = `- ${item.s}`;
    if (seen.has(item.s) || used + line.length + 1 > budget) continue;
    seen.add(item.s);
    chosen.push(item);
    used += line.length + 1;
  }
  if (chosen.length === 0) return null;
  chosen.sort((a, b) => a.index - b.index);
  return [localSummaryHeading, ...chosen.map((c) => `- ${c.s}`)].join('\n');
}

/** A summary clipped to the bound (a model may say more than asked). */
export function clipSummary(text: string): string {
  const trimmed = text.trim();
  return trimmed.length <= summaryMax ? trimmed : `${trimmed.slice(0, summaryMax - 1)}…`;
}

// ---------------------------------------------------------------------------------------------
// Kinds.

export type DocumentKind = 'pdf' | 'docx' | 'markdown' | 'text' | 'html';
export const kindContentTypes: Record<DocumentKind, string> = {
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  markdown: 'text/markdown',
  text: 'text/plain',
  html: 'text/html',
};

export function kindOfContentType(contentType: string): DocumentKind | null {
  const entry = Object.entries(kindContentTypes).find(([, type]) => type === contentType);
  return entry ? (entry[0] as DocumentKind) : null;
}

/**
 * A file's kind, by its first bytes and its name (or declared type): `%PDF-` is a PDF, a zip named
 * .docx (or sent as DOCX) a Word document, text without NUL bytes named .md/.markdown a Markdown
 * file, .html/.htm (or starting with an HTML tag) an HTML page, .txt (or text/plain) plain text.
 */
export function detectDocumentKind(
  head: Uint8Array,
  filename: string,
  mimetype: string,
): DocumentKind | { refused: string } {
  const name = filename.toLowerCase();
  const type = mimetype.split(';')[0]!.trim().toLowerCase();
  const ascii = Buffer.from(head.subarray(0, 1024)).toString('latin1');
  if (ascii.includes('%PDF-')) return 'pdf';
  const zip = head[0] === 0x50 && head[1] === 0x4b;
  if (zip) {
    if (name.endsWith('.docx') || type === kindContentTypes.docx) return 'docx';
    return {
      refused: 'A zip archive is read only as a Word document (.docx); send PDF, DOCX, Markdown, plain text or HTML.',
    };
  }
  if (head.includes(0))
    return { refused: 'The file is not a PDF, a Word document (.docx), Markdown, plain text or HTML.' };
  if (name.endsWith('.md') || name.endsWith('.markdown') || type === 'text/markdown') return 'markdown';
  if (
    name.endsWith('.html') ||
    name.endsWith('.htm') ||
    type === 'text/html' ||
    /^\s*(<!doctype html|<html)/i.test(ascii)
  )
    return 'html';
  if (name.endsWith('.txt') || type === 'text/plain') return 'text';
  return { refused: 'Only PDF, Word (.docx), Markdown (.md), plain text (.txt) and HTML (.html) files are read.' };
}

/** The title a file gets: its name without the extension, one line, 1 to 255 characters. */
export function titleFromFilename(filename: string): string {
  const base = filename
    .replace(/\.[A-Za-z0-9]{1,8}$/, '')
    .replace(/\s+/g, ' ')
    .trim();
  return (base || 'Untitled document').slice(0, titleMax);
}

/** A step as recorded: when it began and ended, and how long it took. */
export function step(name: string, detail: string | null, startedAt: Date, finishedAt: Date): DocumentStep {
  return {
    name,
    detail,
    started_at: startedAt.toISOString(),
    finished_at: finishedAt.toISOString(),
    duration_ms: Math.max(0, finishedAt.getTime() - startedAt.getTime()),
  };
}

/** The extract step's detail: what was read (e.g. "PDF, 3 pages") and the characters of text it gave. */
export function extractStepDetail(read: string, chars: number): string {
  return `${read}, ${chars.toLocaleString('en-US')} characters`;
}

/** The chunk step's detail: how many chunks, of at most `size` characters each. */
export function chunkStepDetail(chunks: number, size = chunkChars): string {
  return `${chunks} chunk${chunks === 1 ? '' : 's'} of at most ${size.toLocaleString('en-US')} characters`;
}

/** A run keeps the summary a person wrote unless the re-read asked for a new one (regenerate_summary). */
export function keepsEditedSummary(doc: { summary_edited: boolean; regenerate_summary: boolean }): boolean {
  return doc.summary_edited && !doc.regenerate_summary;
}

/** The summary's attempt from which a retryable chat model failure fails the run too, as a refusal does at once. */
export const summaryModelAttempts = 3;

// ---------------------------------------------------------------------------------------------
// A company's document written from its own site.

export const companySections = ['does', 'for_whom', 'offers'] as const;
export type CompanySection = (typeof companySections)[number];
const sectionHeadings: Record<CompanySection, string> = {
  does: 'What the company does',
  for_whom: 'For whom',
  offers: 'Offers',
};

export const CompanyFactSchema = z.object({
  fact: z.string().min(1).max(600),
  source_url: z.string().min(1).max(2000),
  confidence: ConfidenceSchema,
});
export type CompanyFact = z.infer<typeof CompanyFactSchema>;
export const CompanyFactsSchema = z.object({
  does: z.array(CompanyFactSchema).max(20).default([]),
  for_whom: z.array(CompanyFactSchema).max(20).default([]),
  offers: z.array(CompanyFactSchema).max(20).default([]),
});
export type CompanyFacts = z.infer<typeof CompanyFactsSchema>;

export interface SitePage {
  url: string;
  /** Which of the site's pages it is: home, about, pricing, products, customers. */
  role: 'home' | 'about' | 'pricing' | 'products' | 'customers';
  title: string | null;
  description: string | null;
  text: string;
}

const roleSection: Record<SitePage['role'], CompanySection> = {
  home: 'does',
  about: 'does',
  pricing: 'offers',
  products: 'offers',
  customers: 'for_whom',
};

/**
 * The local version of a company's facts: the home page's own description (high: the company's
 * words about itself), then each page's leading sentences under the section its page is about
 * (medium), and the home page's sentences naming whom it serves (low). Sentences as written.
 */
export function localCompanyFacts(pages: SitePage[], perPage = 3): CompanyFacts {
  const facts: CompanyFacts = { does: [], for_whom: [], offers: [] };
  const seen = new Set<string>();
  const add = (section: CompanySection, fact: string, url: string, confidence: Confidence) => {
    const clean = fact.replace(/\s+/g, ' ').trim().slice(0, 600);
    if (!clean || seen.has(clean) || facts[section].length >= 20) return;
    seen.add(clean);
    facts[section].push({ fact: clean, source_url: url, confidence });
  };
  for (const page of pages) {
    if (page.role === 'home' && page.description) add('does', page.description, page.url, 'high');
    const all = sentences(page.text);
    for (const s of all.slice(0, perPage)) add(roleSection[page.role], s, page.url, 'medium');
    if (page.role === 'home') {
      for (const s of all
        .slice(perPage)
        .filter((x) => /\b(for|teams?|customers?|businesses|companies|clients)\b/i.test(x))
        .slice(0, 2))
        add('for_whom', s, page.url, 'low');
    }
  }
  return facts;
}

/** The document's Markdown: each fact with its source page and confidence, and a line saying who wrote it. */
export function companyDocument(
  domain: string,
  facts: CompanyFacts,
  writer: { model: string } | 'local',
  pagesRead: string[],
  readAt: Date,
): string {
  const by =
    writer === 'local'
      ? '_Extract (no chat model configured): sentences taken as written from the site, sorted by the page they came from; not a written summary._'
      : `_Written by the chat model ${writer.model} from the site's pages; each fact names the page it came from._`;
  const lines = [
    `# ${domain}: what the company does, for whom, and its offers`,
    '',
    by,
    '',
    `Read ${readAt.toISOString().slice(0, 10)} from: ${pagesRead.join(', ')}`,
  ];
  for (const section of companySections) {
    lines.push('', `## ${sectionHeadings[section]}`, '');
    if (facts[section].length === 0) lines.push('- Nothing found on the pages read.');
    for (const f of facts[section]) lines.push(`- ${f.fact} (source: ${f.source_url}; confidence: ${f.confidence})`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The business context as every prompt of the workspace reads it (the assistant, the outbound
 * agent, saved agents' `context_ref`, suggested replies): the included ready summaries, oldest
 * first within the budget. Empty when there are none.
 */
export function businessContextSection(documents: { title: string; summary: string }[]): string {
  if (documents.length === 0) return '';
  return [
    'What this workspace sells (business-context documents the workspace gave, summarised; use them, do not quote them as your own claims):',
    ...documents.map((d) => `### ${d.title}\n${d.summary}`),
  ].join('\n');
}

/** Drive link (interface spec: AI business context documents, Limits): 1 to 25 drive file ids. */
export const driveFileIdsMax = 25;
export const DriveLinkRequestSchema = z
  .strictObject({
    file_ids: z
      .array(
        z
          .string()
          .min(1)
          .max(255)
          .regex(/^[A-Za-z0-9_-]+$/),
      )
      .min(1)
      .max(driveFileIdsMax)
      .describe('Drive file ids, each 1 to 255 characters of letters, digits, _ and -'),
  })
  .meta({ id: 'BusinessDocumentDriveLink' });
export const DriveLinkAnswerSchema = z
  .object({ documents: z.array(BusinessDocumentSchema).describe('In the order picked') })
  .meta({ id: 'BusinessDocumentDriveLinkAnswer' });
