/**
 * Spreadsheets as rows of text: each row is one page (its cells joined by three spaces, empty
 * trailing cells dropped), and each sheet of a workbook starts with a page `Sheet: <name>`, the
 * sheets in workbook order. An XLSX passes the archive check first; the sheets' names, order and
 * parts are read from xl/workbook.xml and its relationships, kept by that check. Then yauzl
 * streams each part exceljs's parsers need (shared strings, styles, each worksheet in turn) out of
 * the central directory, so no part depends on the order of the zip's entries or on a streaming
 * unzip finding it. A CSV is read with csv-parse.
 */
import { parse } from 'csv-parse/sync';
import { Readable } from 'node:stream';
import { archiveLimits, rowText, sheetHeading } from '../../domain/assistant/attachments.js';
import { checkArchive, openArchive } from './archive.js';
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

interface Relationship {
  type: string;
  part: string;
}

/** xl/_rels/workbook.xml.rels by id: each internal relationship's type and the part it names. */
function workbookRelationships(relsXml: string): Map<string, Relationship> {
  const found = new Map<string, Relationship>();
  for (const rel of elementAttributes(relsXml, 'Relationship')) {
    const id = rel.get('Id');
    const target = rel.get('Target');
    if (id !== undefined && target !== undefined && rel.get('TargetMode') !== 'External') {
      found.set(id, { type: rel.get('Type') ?? '', part: partName('xl/', target) });
    }
  }
  return found;
}

/** The part a relationship of that type names (transitional or strict namespace), if any. */
function relatedPart(rels: Map<string, Relationship>, type: string): string | undefined {
  return [...rels.values()].find((rel) => rel.type.endsWith(`/${type}`))?.part;
}

/**
 * The workbook's worksheets in its order: each <sheet> of xl/workbook.xml with the part its r:id
 * names in xl/_rels/workbook.xml.rels (a relative target, as Excel writes it, or an absolute one,
 * as openpyxl does). Chart and dialog sheets hold no cells and are left out.
 */
export function workbookSheets(workbookXml: string, relsXml: string): { name: string; part: string }[] {
  const rels = workbookRelationships(relsXml);
  const list = /<(?:[\w.-]+:)?sheets\b[^>]*>([\s\S]*?)<\/(?:[\w.-]+:)?sheets\s*>/.exec(workbookXml)?.[1] ?? '';
  const sheets: { name: string; part: string }[] = [];
  for (const sheet of elementAttributes(list, 'sheet')) {
    const name = sheet.get('name');
    // The relationship id: `r:id`, whatever prefix the workbook binds to the relationships namespace.
    const relId = [...sheet].find(([attribute]) => /^[^:]+:id$/.test(attribute))?.[1];
    const rel = relId === undefined ? undefined : rels.get(relId);
    if (name !== undefined && rel !== undefined && (rel.type === '' || rel.type.endsWith('/worksheet'))) {
      sheets.push({ name, part: rel.part });
    }
  }
  return sheets;
}

/** exceljs's streaming reader, driven part by part: what it reads a part with and what it keeps. */
interface PartReader {
  properties: { model: { date1904: boolean } };
  sharedStrings?: unknown[];
  _parseSharedStrings(stream: Readable): AsyncGenerator<unknown>;
  _parseStyles(stream: Readable): Promise<void>;
  _parseWorksheet(stream: Readable, id: string): Generator<{ value: AsyncIterable<{ values: unknown[] }> }>;
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
  const workbookBytes = kept.get(workbookPart);
  if (workbookBytes === undefined)
    throw new ExtractionRefused('The file is a zip archive but not an XLSX workbook (it has no xl/workbook.xml).');
  const workbookXml = xmlText(workbookBytes);
  const relsBytes = kept.get(workbookRelsPart);
  const relsXml = relsBytes === undefined ? '' : xmlText(relsBytes);
  const rels = workbookRelationships(relsXml);
  const listed = workbookSheets(workbookXml, relsXml);
  const archive = await openArchive(bytes);
  try {
    // A worksheet part the workbook does not list is read after its sheets, as exceljs names it.
    const listedParts = new Set(listed.map((sheet) => sheet.part.toLowerCase()));
    const unlisted = archive.names
      .map((name) => ({ name, n: /^xl\/worksheets\/sheet(\d+)\.xml$/i.exec(name)?.[1] }))
      .filter((e): e is { name: string; n: string } => e.n !== undefined && !listedParts.has(e.name.toLowerCase()))
      .sort((a, b) => Number(a.n) - Number(b.n))
      .map((e) => ({ name: `Sheet${e.n}`, part: e.name }));
    for (const sheet of listed) {
      if (!archive.has(sheet.part)) {
        throw new ExtractionRefused(
          `The workbook is damaged: its sheet "${sheet.name}" names the part ${sheet.part}, which the archive does not hold.`,
        );
      }
    }
    const strings = relatedPart(rels, 'sharedStrings');
    if (strings !== undefined && !archive.has(strings)) {
      throw new ExtractionRefused(
        `The workbook is damaged: its shared strings part ${strings} is missing, so its cells' text cannot be read.`,
      );
    }
    // Loaded on the first workbook: most files are PDFs, and a thread starts faster without it.
    const { default: ExcelJS } = await import('exceljs');
    // exceljs's reader parses the parts; each is streamed to it from yauzl, in the order it needs
    // them, instead of through its own streaming unzip (which can lose the archive's last entry).
    const reader = new ExcelJS.stream.xlsx.WorkbookReader(Readable.from([]), {
      worksheets: 'emit',
      sharedStrings: 'cache',
      // Styles say which numbers are dates; links are not needed.
      styles: 'cache',
      hyperlinks: 'ignore',
    }) as unknown as PartReader;
    const workbookPr = elementAttributes(workbookXml, 'workbookPr')[0];
    reader.properties = { model: { date1904: ['1', 'true'].includes(workbookPr?.get('date1904') ?? '') } };
    try {
      const sharedStrings = strings ?? 'xl/sharedStrings.xml';
      if (archive.has(sharedStrings)) {
        // Cached, the shared strings yield nothing: the parse is only run to its end.
        for await (const nothing of reader._parseSharedStrings(await archive.open(sharedStrings))) void nothing;
      }
      const styles = relatedPart(rels, 'styles') ?? 'xl/styles.xml';
      if (archive.has(styles)) await reader._parseStyles(await archive.open(styles));
      const pages: string[] = [];
      for (const [at, sheet] of [...listed, ...unlisted].entries()) {
        pages.push(sheetHeading(sheet.name));
        const [emitted] = reader._parseWorksheet(await archive.open(sheet.part), String(at + 1));
        // Rows are parsed as the part inflates: a large worksheet is never held whole.
        for await (const row of emitted!.value) {
          const values = row.values;
          const cells: string[] = [];
          // `values` is 1-based and sparse: a missing cell is an empty one.
          for (let c = 1; c < values.length; c += 1) cells.push(cellText(values[c]));
          pages.push(rowText(cells));
          progress.onRow?.();
        }
      }
      return pages;
    } catch (error) {
      if (error instanceof ExtractionRefused) throw error;
      throw unreadable(error);
    }
  } finally {
    archive.close();
  }
}

const unreadable = (error: unknown) =>
  new ExtractionRefused(
    `The workbook cannot be read (${String((error as Error)?.message ?? error).replace(/\.$/, '')}).`,
  );

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
