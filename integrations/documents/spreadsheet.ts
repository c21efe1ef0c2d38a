/**
 * Spreadsheets as rows of text: each row is one page (its cells joined by three spaces, empty
 * trailing cells dropped), and each sheet of a workbook starts with a page `Sheet: <name>`, the
 * sheets in workbook order. An XLSX passes the archive check before exceljs's streaming reader
 * opens it; the sheets' names and order are read from xl/workbook.xml and its relationships, kept
 * by that check, so they do not depend on the order of the zip's entries. A CSV is read with
 * csv-parse.
 */
import { parse } from 'csv-parse/sync';
import type { Workbook } from 'exceljs';
import type { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import { archiveLimits, rowText, sheetHeading } from '../../domain/assistant/attachments.js';
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
  /** Its place in the workbook's <sheets> (after them all when the workbook does not list it). */
  rank: number;
  name: string;
  rows: string[];
}

const workbookPart = 'xl/workbook.xml';
const workbookRelsPart = 'xl/_rels/workbook.xml.rels';

/** An XML part's text: UTF-16 when its byte order mark says so, else UTF-8. */
function xmlText(bytes: Buffer): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes);
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes);
  return new TextDecoder('utf-8').decode(bytes);
}

const entityText: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** An attribute's value as XML reads it: whitespace characters as spaces, then references decoded. */
function attributeValue(raw: string): string {
  return raw.replace(/[\t\n\r]/g, ' ').replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, ref: string) => {
    if (ref.startsWith('#')) {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return entityText[ref] ?? whole;
  });
}

/** The attributes of each element named `local` (under any namespace prefix), comments ignored. */
function elementAttributes(xml: string, local: string): Map<string, string>[] {
  const tag = new RegExp(`<(?:[\\w.-]+:)?${local}((?:\\s+[^\\s=/>]+\\s*=\\s*(?:"[^"]*"|'[^']*'))*)\\s*/?>`, 'g');
  const found: Map<string, string>[] = [];
  for (const element of xml.replace(/<!--[\s\S]*?-->/g, '').matchAll(tag)) {
    const attributes = new Map<string, string>();
    for (const a of element[1]!.matchAll(/([^\s=]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
      attributes.set(a[1]!, attributeValue(a[2] ?? a[3] ?? ''));
    }
    found.push(attributes);
  }
  return found;
}

/** A relationship's target as a zip entry name: relative to `base`, or from the root when it starts with "/". */
function partName(base: string, target: string): string {
  let path = target.replace(/\\/g, '/');
  try {
    path = decodeURI(path);
  } catch {
    // A malformed escape: the target as written.
  }
  const segments = path.startsWith('/') ? [] : base.split('/').filter(Boolean);
  for (const segment of path.split('/')) {
    if (segment === '..') segments.pop();
    else if (segment !== '' && segment !== '.') segments.push(segment);
  }
  return segments.join('/');
}

/**
 * The workbook's sheets in its order: each <sheet> of xl/workbook.xml with the part its r:id names
 * in xl/_rels/workbook.xml.rels (a relative target, as Excel writes it, or an absolute one, as
 * openpyxl does).
 */
export function workbookSheets(workbookXml: string, relsXml: string): { name: string; part: string }[] {
  const targets = new Map<string, string>();
  for (const rel of elementAttributes(relsXml, 'Relationship')) {
    const id = rel.get('Id');
    const target = rel.get('Target');
    if (id !== undefined && target !== undefined && rel.get('TargetMode') !== 'External') {
      targets.set(id, partName('xl/', target));
    }
  }
  const list = /<(?:[\w.-]+:)?sheets\b[^>]*>([\s\S]*?)<\/(?:[\w.-]+:)?sheets\s*>/.exec(workbookXml)?.[1] ?? '';
  const sheets: { name: string; part: string }[] = [];
  for (const sheet of elementAttributes(list, 'sheet')) {
    const name = sheet.get('name');
    // The relationship id: `r:id`, whatever prefix the workbook binds to the relationships namespace.
    const relId = [...sheet].find(([attribute]) => /^[^:]+:id$/.test(attribute))?.[1];
    const part = relId === undefined ? undefined : targets.get(relId);
    if (name !== undefined && part !== undefined) sheets.push({ name, part });
  }
  return sheets;
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
  const { kept } = await checkArchive(bytes, archiveLimits, [workbookPart, workbookRelsPart]);
  const workbookXml = kept.get(workbookPart);
  if (workbookXml === undefined)
    throw new ExtractionRefused('The file is a zip archive but not an XLSX workbook (it has no xl/workbook.xml).');
  const relsXml = kept.get(workbookRelsPart);
  const listed = workbookSheets(xmlText(workbookXml), relsXml === undefined ? '' : xmlText(relsXml));
  // exceljs reads the parts named xl/worksheets/sheet<n>.xml; <n> -> the sheet's place in the workbook.
  const rankOfPart = new Map<string, number>();
  listed.forEach(({ part }, at) => {
    const n = /^xl\/worksheets\/sheet(\d+)\.xml$/i.exec(part)?.[1];
    if (n !== undefined && !rankOfPart.has(n)) rankOfPart.set(n, at);
  });
  // Loaded on the first workbook: most files are PDFs, and a thread starts faster without it.
  const { default: ExcelJS } = await import('exceljs');
  const reader = new ExcelJS.stream.xlsx.WorkbookReader(Readable.from([bytes]), {
    worksheets: 'emit',
    sharedStrings: 'cache',
    // Styles say which numbers are dates; links are not needed. Entries say which part each
    // worksheet is read from.
    styles: 'cache',
    hyperlinks: 'ignore',
    entries: 'emit',
  });
  // Emitted just before the worksheet of that part is handed out.
  let partNumber: string | undefined;
  (reader as unknown as EventEmitter).on('entry', (entry: { type: string; id?: string }) => {
    if (entry.type === 'worksheet') partNumber = entry.id;
  });
  const sheets: SheetRows[] = [];
  try {
    for await (const worksheet of reader) {
      const at = partNumber === undefined ? undefined : rankOfPart.get(partNumber);
      partNumber = undefined;
      const sheet: SheetRows =
        at === undefined
          ? { rank: listed.length, name: (worksheet as unknown as { name: string }).name, rows: [] }
          : { rank: at, name: listed[at]!.name, rows: [] };
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
  const ordered = sheets.map((s, i) => ({ s, i })).sort((a, b) => a.s.rank - b.s.rank || a.i - b.i);
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
