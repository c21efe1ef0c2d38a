/**
 * Chat attachments (interface spec: Chat attachment pages; operationId readChatAttachmentPages): a PDF, XLSX or CSV uploaded to an assistant
 * conversation, read back as pages of text. Pure: the schemas, the limits, how a file's kind is
 * judged, and the layout rule that turns a PDF page's positioned text into lines
 * (docs/decisions/033-chat-attachment-extraction.md).
 */
import { z } from 'zod';
import { queryInteger, TimestampSchema, UuidSchema } from '../shared/common.js';

// ---- Limits ----

const MiB = 1024 * 1024;

/** The largest upload, 20 MiB (CHAT_ATTACHMENT_MAX_BYTES changes it); a larger one is 413. */
export const attachmentBytesMaxDefault = 20 * MiB;
/**
 * A page read stops before the page that would take its text past 256 KiB (UTF-8), so
 * `next_offset` can come before offset + limit. A read always returns at least one page, and no
 * page is stored longer than this (a longer one is cut and says so), so no read passes it.
 */
export const pageReadBytesMax = 256 * 1024;
/** Pages per read (spec 8). */
export const pageReadLimitMax = 50;

/** How long one file's extraction may take (CHAT_ATTACHMENT_EXTRACT_SECONDS). */
export const extractSecondsDefault = 60;
/** The reader process's JavaScript heap (CHAT_ATTACHMENT_EXTRACT_HEAP_MB). */
export const extractHeapMbDefault = 256;
/**
 * How much the reader process's resident memory may grow while it reads one file
 * (CHAT_ATTACHMENT_EXTRACT_RSS_MB): a PDF's decoded streams live outside the JavaScript heap, so
 * the heap limit alone does not bound them.
 */
export const extractRssGrowthMbDefault = 768;

/** An XLSX is a zip archive; its central directory is checked against these before it is opened. */
export const archiveLimits = {
  /** Entries in the archive. */
  entriesMax: 5_000,
  /** Uncompressed bytes of all entries together. */
  uncompressedBytesMax: 256 * MiB,
  /** Uncompressed to compressed size of any entry larger than `ratioFloorBytes` uncompressed. */
  ratioMax: 200,
  ratioFloorBytes: MiB,
} as const;

export interface ChatAttachmentLimits {
  maxUploadBytes: number;
  extractSeconds: number;
  extractHeapMb: number;
  extractRssGrowthMb: number;
}

export const defaultChatAttachmentLimits: ChatAttachmentLimits = {
  maxUploadBytes: attachmentBytesMaxDefault,
  extractSeconds: extractSecondsDefault,
  extractHeapMb: extractHeapMbDefault,
  extractRssGrowthMb: extractRssGrowthMbDefault,
};

/** "20 MiB", "512 KiB", "100 bytes": a limit as a person reads it. */
export function bytesLabel(bytes: number): string {
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

// ---- Kinds ----

export const attachmentKinds = ['pdf', 'xlsx', 'csv'] as const;
export const AttachmentKindSchema = z.enum(attachmentKinds).meta({ id: 'ChatAttachmentKind' });
export type AttachmentKind = z.infer<typeof AttachmentKindSchema>;

export const attachmentContentTypes: Record<AttachmentKind, string> = {
  pdf: 'application/pdf',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  csv: 'text/csv',
};

/** Why a file is not one of the kinds we read (415). */
export interface KindRefusal {
  refused: string;
}

const startsWith = (head: Uint8Array, bytes: number[], at = 0) => bytes.every((b, i) => head[at + i] === b);
const zipMagic = [0x50, 0x4b, 0x03, 0x04];
/** An OLE compound file: what Office writes for a password-protected (encrypted) workbook. */
const oleMagic = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
const pdfMagic = [0x25, 0x50, 0x44, 0x46, 0x2d]; // %PDF-

/** Where `%PDF-` starts: readers accept it within the first 1024 bytes. */
function pdfHeaderAt(head: Uint8Array): number {
  const end = Math.min(head.length - pdfMagic.length, 1024);
  for (let i = 0; i <= end; i += 1) if (startsWith(head, pdfMagic, i)) return i;
  return -1;
}

const extensionOf = (filename: string) => /\.([A-Za-z0-9]+)$/.exec(filename)?.[1]?.toLowerCase() ?? '';

/**
 * The kind of an upload, judged by its first bytes and its name: `%PDF-` is a PDF whatever its
 * name; a zip archive (or an encrypted Office file) named `.xlsx` is a workbook; text without NUL
 * bytes named `.csv` (or sent as text/csv) is a CSV. Anything else is refused with the reason.
 */
export function detectAttachmentKind(
  head: Uint8Array,
  filename: string,
  contentType: string | undefined,
): AttachmentKind | KindRefusal {
  const extension = extensionOf(filename);
  if (pdfHeaderAt(head) >= 0) return 'pdf';
  const zip = startsWith(head, zipMagic);
  const ole = startsWith(head, oleMagic);
  if (zip || ole) {
    if (extension === 'xlsx' || contentType === attachmentContentTypes.xlsx) return 'xlsx';
    return { refused: `${filename} is an archive, not a .xlsx workbook; upload a PDF, an XLSX or a CSV file.` };
  }
  if (extension === 'pdf')
    return { refused: `${filename} is named .pdf but is not a PDF: it does not start with %PDF-.` };
  if (extension === 'xlsx')
    return { refused: `${filename} is named .xlsx but is not an XLSX workbook (a zip archive).` };
  const csvNamed = extension === 'csv' || (contentType ?? '').split(';')[0]!.trim().toLowerCase() === 'text/csv';
  if (csvNamed) {
    if (head.includes(0)) return { refused: `${filename} is named .csv but holds binary data, not text.` };
    return 'csv';
  }
  return { refused: `${filename || 'The file'} is not a PDF, an XLSX or a CSV file; only those are read.` };
}

// ---- Text ----

/** Characters Postgres cannot store or that would break a line: NUL and the other C0 controls but tab. */
const controlCharacters = /[\u0000-\u0008\u000b-\u001f\u007f]/g;

/** One line of text: control characters dropped, tabs and line breaks as spaces. */
export function cleanText(text: string): string {
  return text.replace(/[\t\n\r\u2028\u2029]/g, ' ').replace(controlCharacters, '');
}

const encoder = new TextEncoder();
const utf8Bytes = (text: string) => encoder.encode(text).length;

/** A page's text within `maxBytes` (UTF-8): a longer one is cut on a character boundary and says where. */
export function capPageText(text: string, maxBytes = pageReadBytesMax): string {
  if (text.length * 3 <= maxBytes || utf8Bytes(text) <= maxBytes) return text;
  const note = `\n[page cut at ${bytesLabel(maxBytes)} of text]`;
  const budget = maxBytes - utf8Bytes(note);
  // Find the longest prefix within the budget; code points, so a surrogate pair is never split.
  let used = 0;
  let end = 0;
  for (const ch of text) {
    const size = utf8Bytes(ch);
    if (used + size > budget) break;
    used += size;
    end += ch.length;
  }
  return text.slice(0, end) + note;
}

/** The text of a page that could not be read (pages counted from 1, as a person counts them). */
export function unreadablePageText(pageNumber: number, reason: string): string {
  return `[page ${pageNumber} could not be read: ${cleanText(reason).trim() || 'unknown error'}]`;
}

// ---- Layout of a PDF page ----

/**
 * A run of text as the PDF places it: `x` and `y` are its start and baseline in points from the
 * page's top left (y grows downward), `width` its advance and `size` its font size.
 */
export interface PositionedText {
  text: string;
  x: number;
  y: number;
  width: number;
  size: number;
}

/** The gap that separates columns, in average character widths of the text beside it. */
export const columnGapCharacters = 2;
/** The gap that separates words, in the same unit; a narrower one joins the runs (kerning, split glyphs). */
export const wordGapCharacters = 0.2;
/** Runs on one line: baselines within this share of the larger font size. */
export const baselineTolerance = 0.4;
/** What every gap between columns becomes. */
export const columnSeparator = '   ';

interface Run extends PositionedText {
  /** Average character width: the run's advance over its characters. */
  charWidth: number;
}

function runOf(item: PositionedText): Run | null {
  const raw = cleanText(item.text);
  const text = raw.trim();
  if (!text || !Number.isFinite(item.x) || !Number.isFinite(item.y)) return null;
  const size = Number.isFinite(item.size) && item.size > 0 ? item.size : 10;
  const width = Number.isFinite(item.width) && item.width > 0 ? item.width : raw.length * size * 0.5;
  const charWidth = width / Math.max(1, raw.length);
  // Leading spaces move the start; trailing ones shorten the advance.
  const leading = raw.length - raw.trimStart().length;
  const trailing = raw.length - raw.trimEnd().length;
  return {
    text,
    x: item.x + leading * charWidth,
    y: item.y,
    width: Math.max(0, width - (leading + trailing) * charWidth),
    size,
    charWidth,
  };
}

/**
 * Lines of a page laid out as printed (the quality anchor is poppler's `pdftotext -layout`):
 * runs whose baselines are within `baselineTolerance` of the larger font size are one line, read
 * left to right. Between two runs, a gap wider than `columnGapCharacters` average character
 * widths is a column gap and becomes exactly three spaces; a narrower one wider than
 * `wordGapCharacters` is one space; a smaller one joins them. A line that starts a column gap or
 * more right of the page's leftmost text starts with three spaces (the continuation of a table
 * cell, an empty first cell). So a table row is one line with its columns side by side, and each
 * further line of a multi-line cell is a line of its own. A run drawn twice in the same place
 * (fake bold) counts once. No text: no lines.
 */
export function layoutLines(items: readonly PositionedText[]): string[] {
  const runs = items.map(runOf).filter((r): r is Run => r !== null);
  if (runs.length === 0) return [];
  runs.sort((a, b) => a.y - b.y || a.x - b.x);
  const lines: { y: number; size: number; runs: Run[] }[] = [];
  for (const run of runs) {
    const line = lines[lines.length - 1];
    if (line && Math.abs(run.y - line.y) <= baselineTolerance * Math.max(run.size, line.size)) {
      line.runs.push(run);
      line.size = Math.max(line.size, run.size);
    } else {
      lines.push({ y: run.y, size: run.size, runs: [run] });
    }
  }
  const left = Math.min(...runs.map((r) => r.x));
  return lines.map((line) => {
    const ordered = line.runs.sort((a, b) => a.x - b.x);
    let text = '';
    let end = 0;
    let previous: Run | null = null;
    for (const run of ordered) {
      if (previous === null) {
        text = run.x - left > columnGapCharacters * run.charWidth ? columnSeparator + run.text : run.text;
      } else {
        const unit = (previous.charWidth + run.charWidth) / 2;
        const gap = run.x - end;
        if (run.text === previous.text && Math.abs(run.x - previous.x) < unit / 2) continue;
        if (gap > columnGapCharacters * unit) text += columnSeparator;
        else if (gap > wordGapCharacters * unit) text += ' ';
        text += run.text;
      }
      end = previous === null ? run.x + run.width : Math.max(end, run.x + run.width);
      previous = run;
    }
    return text;
  });
}

/** A page's text: its lines joined by line breaks, `""` when it has none, cut at the page size. */
export function layoutPage(items: readonly PositionedText[]): string {
  return capPageText(layoutLines(items).join('\n'));
}

// ---- Spreadsheets ----

/**
 * One spreadsheet row as one page: cells cleaned to one line, empty trailing cells dropped, the
 * rest joined by three spaces (an empty cell in the middle stays, as an empty field).
 */
export function rowText(cells: readonly string[]): string {
  const cleaned = cells.map((c) => cleanText(c).trim());
  let end = cleaned.length;
  while (end > 0 && cleaned[end - 1] === '') end -= 1;
  return capPageText(cleaned.slice(0, end).join(columnSeparator));
}

/** The page that starts each sheet of a workbook, in workbook order. */
export const sheetHeading = (name: string) => capPageText(`Sheet: ${cleanText(name).trim()}`);

// ---- API ----

export const AttachmentStatusSchema = z.enum(['pending', 'ready', 'failed']).meta({ id: 'ChatAttachmentStatus' });
export type AttachmentStatus = z.infer<typeof AttachmentStatusSchema>;

export const ChatAttachmentSchema = z
  .object({
    id: UuidSchema,
    conversation_id: UuidSchema,
    filename: z.string().describe('The file name as uploaded'),
    kind: AttachmentKindSchema,
    byte_size: z.int().min(0).describe('Bytes uploaded'),
    page_count: z
      .int()
      .min(0)
      .nullable()
      .describe(
        "Pages of the whole file (a spreadsheet's rows, one `Sheet: <name>` line per sheet included); null until its text is read",
      ),
    status: AttachmentStatusSchema.describe('`pending` while its text is being read, then `ready` or `failed`'),
    error: z.string().nullable().describe('Why the file could not be read, when `failed`'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'ChatAttachment', description: 'A file uploaded to an assistant conversation' });
export type ChatAttachment = z.infer<typeof ChatAttachmentSchema>;

export const ChatAttachmentListSchema = z
  .object({ attachments: z.array(ChatAttachmentSchema).describe('Oldest first') })
  .meta({ id: 'ChatAttachmentList' });

export const ChatAttachmentPagesQuerySchema = z.object({
  offset: queryInteger(z.int().min(0).default(0)).describe('First page to read, counted from zero'),
  limit: queryInteger(z.int().min(1).max(pageReadLimitMax).default(pageReadLimitMax)).describe(
    'Most pages to read, 1 to 50',
  ),
});
export type ChatAttachmentPagesQuery = z.infer<typeof ChatAttachmentPagesQuerySchema>;

/** Spec 2.1: every field required. */
export const ChatAttachmentPagesResponseSchema = z
  .object({
    attachment_id: UuidSchema.describe('The attachment read'),
    filename: z.string().describe('Attachment file name'),
    offset: z.int().min(0).describe('First page in this read, counted from zero'),
    pages: z
      .array(z.string())
      .describe(
        "Each page's text in page order. A page with no text is an empty string. A page whose text could not be read says so in its text.",
      ),
    page_count: z.int().min(0).describe('Pages in the whole file, not in this read'),
    next_offset: z
      .int()
      .min(0)
      .nullable()
      .describe(
        'Where the next read starts. Null when this read reaches the last page. It can come before offset plus limit, because a read also stops at a size.',
      ),
  })
  .meta({
    id: 'ChatAttachmentPagesResponse',
    description: 'Pages of an attachment as text (interface spec 2.1 Chat attachment pages)',
  });
export type ChatAttachmentPagesResponse = z.infer<typeof ChatAttachmentPagesResponseSchema>;
