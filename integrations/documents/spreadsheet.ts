/**
 * Spreadsheets as rows of text: each row is one page (its cells joined by three spaces, empty
 * trailing cells dropped), and each sheet of a workbook starts with a page `Sheet: <name>`, the
 * sheets in workbook order. An XLSX passes the archive check before exceljs's streaming reader
 * opens it; a CSV is read with csv-parse.
 */
import { parse } from 'csv-parse/sync';
import type { Workbook } from 'exceljs';
import { Readable } from 'node:stream';
import { rowText, sheetHeading } from '../../domain/assistant/attachments.js';
import { checkArchive } from './archive.js';
import { ExtractionRefused } from './refusal.js';

const oleMagic = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);

/** A date cell: the day alone at midnight, else the day and the time (the workbook's own clock, read as UTC). */
function dateText(date: Date): string {
  if (Number.isNaN(date.getTime())) return '';
  const iso = date.toISOString();
  return iso.endsWith('T00:00:00.000Z') ? iso.slice(0, 10) : iso.slice(0, 19).replace('T', ' ');
}

/** What a person sees in a cell: a formula's result, a rich text's text, a link's label, an error's code. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  if (value instanceof Date) return dateText(value);
  if (typeof value === 'object') {
    const v = value as {
      richText?: { text?: string }[];
      text?: unknown;
      hyperlink?: string;
      result?: unknown;
      formula?: string;
      sharedFormula?: string;
      error?: string;
    };
    if (Array.isArray(v.richText)) return v.richText.map((r) => r.text ?? '').join('');
    if ('formula' in v || 'sharedFormula' in v || 'result' in v) return cellText(v.result);
    if (typeof v.error === 'string') return v.error;
    if (v.text !== undefined) return cellText(v.text);
    if (typeof v.hyperlink === 'string') return v.hyperlink;
  }
  return '';
}

interface SheetRows {
  id: string;
  name: string;
  rows: string[];
}

export interface SpreadsheetProgress {
  onRow?: () => void;
}

export async function extractXlsx(bytes: Buffer, progress: SpreadsheetProgress = {}): Promise<string[]> {
  if (bytes.subarray(0, oleMagic.length).equals(oleMagic)) {
    throw new ExtractionRefused(
      'The workbook is encrypted (password-protected); save it without a password and upload it again.',
    );
  }
  const { entries } = await checkArchive(bytes);
  if (!entries.includes('xl/workbook.xml'))
    throw new ExtractionRefused('The file is a zip archive but not an XLSX workbook (it has no xl/workbook.xml).');
  // Loaded on the first workbook: most files are PDFs, and a thread starts faster without it.
  const { default: ExcelJS } = await import('exceljs');
  const reader = new ExcelJS.stream.xlsx.WorkbookReader(Readable.from([bytes]), {
    worksheets: 'emit',
    sharedStrings: 'cache',
    // Styles say which numbers are dates; links and entries are not needed.
    styles: 'cache',
    hyperlinks: 'ignore',
    entries: 'ignore',
  });
  const sheets: SheetRows[] = [];
  try {
    for await (const worksheet of reader) {
      const meta = worksheet as unknown as { id: number | string; name: string };
      const sheet: SheetRows = { id: String(meta.id), name: meta.name, rows: [] };
      for await (const row of worksheet) {
        const values = (row as unknown as { values: unknown[] }).values;
        const cells: string[] = [];
        // `values` is 1-based and sparse: a missing cell is an empty one.
        for (let c = 1; c < values.length; c += 1) cells.push(cellText(values[c]));
        sheet.rows.push(rowText(cells));
        progress.onRow?.();
      }
      sheets.push(sheet);
    }
  } catch (error) {
    if (error instanceof ExtractionRefused) throw error;
    // A fault of the streaming reader itself, not of the file: a valid workbook once failed here
    // with "Cannot read properties of undefined (reading 'sheets')" (its workbook model read
    // before it was parsed). Such a workbook is read whole instead; the archive check has bounded
    // what it inflates to.
    if (error instanceof TypeError) return readWholeWorkbook(new ExcelJS.Workbook(), bytes, progress);
    throw unreadable(error);
  }
  // Workbook order: the order of <sheets> in xl/workbook.xml, whatever order the zip holds them in.
  const order = (
    (reader as unknown as { model?: { sheets?: { id: number | string; name: string }[] } }).model?.sheets ?? []
  ).map((s) => String(s.id));
  const rank = (s: SheetRows) => {
    const at = order.indexOf(s.id);
    return at === -1 ? order.length : at;
  };
  const ordered = sheets.map((s, i) => ({ s, i })).sort((a, b) => rank(a.s) - rank(b.s) || a.i - b.i);
  return ordered.flatMap(({ s }) => [sheetHeading(s.name), ...s.rows]);
}

const unreadable = (error: unknown) =>
  new ExtractionRefused(
    `The workbook cannot be read (${String((error as Error)?.message ?? error).replace(/\.$/, '')}).`,
  );

/** The workbook read whole (exceljs's non-streaming loader), its sheets in workbook order. */
async function readWholeWorkbook(workbook: Workbook, bytes: Buffer, progress: SpreadsheetProgress): Promise<string[]> {
  try {
    await workbook.xlsx.load(bytes as unknown as Parameters<Workbook['xlsx']['load']>[0]);
  } catch (error) {
    throw unreadable(error);
  }
  return workbook.worksheets.flatMap((worksheet) => {
    const rows: string[] = [];
    worksheet.eachRow((row) => {
      const values = row.values as unknown[];
      const cells: string[] = [];
      for (let c = 1; c < values.length; c += 1) cells.push(cellText(values[c]));
      rows.push(rowText(cells));
      progress.onRow?.();
    });
    return [sheetHeading(worksheet.name), ...rows];
  });
}

/** The delimiter of a CSV: whichever of , ; tab | appears most often outside quotes on its first line. */
export function csvDelimiter(text: string): string {
  const counts = new Map<string, number>([
    [',', 0],
    [';', 0],
    ['\t', 0],
    ['|', 0],
  ]);
  let quoted = false;
  for (let i = 0; i < text.length && i < 65_536; i += 1) {
    const ch = text[i]!;
    if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === '\n' || ch === '\r')) break;
    else if (!quoted && counts.has(ch)) counts.set(ch, counts.get(ch)! + 1);
  }
  let best = ',';
  for (const [d, n] of counts) if (n > counts.get(best)!) best = d;
  return best;
}

/** A CSV's text: UTF-8 (a byte order mark dropped), else Windows-1252, which decodes any bytes. */
function decodeCsv(bytes: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

export function extractCsv(bytes: Buffer, progress: SpreadsheetProgress = {}): string[] {
  const text = decodeCsv(bytes);
  let records: string[][];
  try {
    records = parse(text, {
      delimiter: csvDelimiter(text),
      relax_column_count: true,
      relax_quotes: true,
      skip_empty_lines: true,
    });
  } catch (error) {
    throw new ExtractionRefused(
      `The CSV cannot be read (${String((error as Error)?.message ?? error).replace(/\.$/, '')}).`,
    );
  }
  return records.map((cells) => {
    progress.onRow?.();
    return rowText(cells);
  });
}
