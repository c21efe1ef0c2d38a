/**
 * The document extractor in its reader processes, without the service around it: what it reads,
 * what it refuses (encrypted and damaged files, zip bombs before they are opened) and the limits
 * it reads within (a deadline, the reader's heap, the reader's memory growth), each ending only
 * the reader that passed it, never the process that asked.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDeflate } from 'node:zlib';
import ExcelJS from 'exceljs';
import { PDFDocument, PDFName, PDFNumber, PDFRawStream, StandardFonts } from 'pdf-lib';
import { afterAll, describe, expect, it } from 'vitest';
import { archiveLimits } from '../../domain/assistant/attachments.js';
import { checkArchive } from '../../integrations/documents/archive.js';
import {
  createDocumentExtractor,
  ExtractionRefused,
  type DocumentExtractor,
} from '../../integrations/documents/extractor.js';
import { extractXlsx } from '../../integrations/documents/spreadsheet.js';
import { buildPdf, buildXlsx, buildZip, reportPdf, tableTexts, workbookEntries } from '../support/documents.js';

const fixtures = join(import.meta.dirname, '..', 'fixtures', 'attachments');
const defaults = { extractSeconds: 60, extractHeapMb: 256, extractRssGrowthMb: 768 };
const extractors: DocumentExtractor[] = [];
const extractorWith = (limits: Partial<typeof defaults> = {}) => {
  const extractor = createDocumentExtractor({ ...defaults, ...limits }, { concurrency: 1 });
  extractors.push(extractor);
  return extractor;
};
afterAll(async () => {
  await Promise.all(extractors.map((e) => e.close()));
});

/** `bytes` spaces, deflated a chunk at a time (never held whole). */
async function deflatedSpaces(bytes: number): Promise<Buffer> {
  const deflate = createDeflate({ level: 1 });
  const out: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => out.push(chunk));
  const chunk = Buffer.alloc(1024 * 1024, 0x20);
  for (let written = 0; written < bytes; written += chunk.length) {
    if (!deflate.write(chunk)) await new Promise((resolve) => deflate.once('drain', resolve));
  }
  await new Promise((resolve) => deflate.end(resolve));
  return Buffer.concat(out);
}

const refusalOf = async (promise: Promise<unknown>): Promise<string> => {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ExtractionRefused);
  return (error as Error).message;
};

describe('reading', () => {
  const extractor = extractorWith();

  it('reads a PDF page by page, laid out, and a page without text as ""', async () => {
    const pdf = await buildPdf([
      {
        texts: tableTexts({
          columns: [50, 250],
          rows: [
            ['Name', 'Amount'],
            ['Ada', '12.50'],
          ],
          top: 100,
        }),
      },
      { blank: true },
      { image: 'gray' },
    ]);
    const { pages, peakHeapBytes, elapsedMs } = await extractor.extract('pdf', pdf);
    expect(pages).toEqual(['Name   Amount\nAda   12.50', '', '']);
    expect(peakHeapBytes).toBeGreaterThan(0);
    expect(elapsedMs).toBeGreaterThan(0);
  });

  it("keeps the caller's bytes whole (a copy goes to the reader)", async () => {
    const pdf = await buildPdf([{ blank: true }]);
    const before = Buffer.from(pdf);
    await extractor.extract('pdf', pdf);
    expect(pdf.equals(before)).toBe(true);
  });

  it('reads a PDF encrypted only against changes (it opens without a password), as every reader does', async () => {
    const { pages } = await extractor.extract('pdf', readFileSync(join(fixtures, 'owner-encrypted.pdf')));
    expect(pages).toEqual(['Budget   1200']);
  });

  it("reads a workbook's sheets in workbook order, whatever order the archive holds them in", async () => {
    const workbook = new ExcelJS.Workbook();
    const first = workbook.addWorksheet('Stored first');
    const second = workbook.addWorksheet('Shown first');
    first.addRow(['b1']);
    second.addRow(['a1', 2]);
    // The tab order puts the second sheet (xl/worksheets/sheet2.xml) before the first.
    (second as unknown as { orderNo: number }).orderNo = 0;
    (first as unknown as { orderNo: number }).orderNo = 1;
    const bytes = Buffer.from(await workbook.xlsx.writeBuffer());
    const { pages } = await extractor.extract('xlsx', bytes);
    expect(pages).toEqual(['Sheet: Shown first', 'a1   2', 'Sheet: Stored first', 'b1']);
  });

  it('names and orders the sheets from the workbook when the zip holds the worksheets before it', async () => {
    const xml = (body: string) =>
      Buffer.from(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n${body}`, 'utf8');
    const worksheet = (cells: string) =>
      xml(
        `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">${cells}</row></sheetData></worksheet>`,
      );
    /** sheet1.xml holds Accounts and sheet2.xml Leads; the workbook shows Leads first. */
    const layout = (target: (file: string) => string, last: 'workbook' | 'rels') => {
      const workbook = {
        name: 'xl/workbook.xml',
        data: xml(
          '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">' +
            '<sheets><sheet name="Leads" sheetId="1" r:id="rId2"/><sheet name="Accounts" sheetId="2" r:id="rId1"/></sheets></workbook>',
        ),
      };
      const rels = {
        name: 'xl/_rels/workbook.xml.rels',
        data: xml(
          '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
            `<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="${target('sheet1.xml')}"/>` +
            `<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="${target('sheet2.xml')}"/></Relationships>`,
        ),
      };
      const [contentTypes, packageRels] = workbookEntries();
      return buildZip([
        { name: 'xl/worksheets/sheet1.xml', data: worksheet('<c r="A1" t="inlineStr"><is><t>Acme</t></is></c>') },
        {
          name: 'xl/worksheets/sheet2.xml',
          data: worksheet('<c r="A1" t="inlineStr"><is><t>Ada</t></is></c><c r="B1"><v>7</v></c>'),
        },
        ...(last === 'workbook' ? [rels, workbook] : [workbook, rels]),
        packageRels!,
        contentTypes!,
      ]);
    };
    const expected = ['Sheet: Leads', 'Ada   7', 'Sheet: Accounts', 'Acme'];
    // As openpyxl writes a workbook: worksheets first, relationship targets from the package root.
    expect(
      (
        await extractor.extract(
          'xlsx',
          layout((f) => `/xl/worksheets/${f}`, 'workbook'),
        )
      ).pages,
    ).toEqual(expected);
    // Targets relative to xl/ (as Excel writes them), the relationships last of all.
    expect(
      (
        await extractor.extract(
          'xlsx',
          layout((f) => `worksheets/${f}`, 'rels'),
        )
      ).pages,
    ).toEqual(expected);
  });

  it('reads every sheet and every shared string whichever part the zip holds last, read after read', async () => {
    const ns = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';
    const xml = (body: string) =>
      Buffer.from(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n${body}`, 'utf8');
    const worksheet = (cells: string) =>
      xml(
        `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1">${cells}</row></sheetData></worksheet>`,
      );
    const [contentTypes, packageRels] = workbookEntries();
    const parts = {
      workbook: {
        name: 'xl/workbook.xml',
        data: xml(
          `<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="${ns}">` +
            '<sheets><sheet name="Leads" sheetId="1" r:id="rId1"/><sheet name="Accounts" sheetId="2" r:id="rId2"/></sheets></workbook>',
        ),
      },
      rels: {
        name: 'xl/_rels/workbook.xml.rels',
        data: xml(
          '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
            `<Relationship Id="rId1" Type="${ns}/worksheet" Target="worksheets/sheet1.xml"/>` +
            `<Relationship Id="rId2" Type="${ns}/worksheet" Target="worksheets/sheet2.xml"/>` +
            `<Relationship Id="rId3" Type="${ns}/sharedStrings" Target="sharedStrings.xml"/></Relationships>`,
        ),
      },
      strings: {
        name: 'xl/sharedStrings.xml',
        data: xml(
          '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="2" uniqueCount="2"><si><t>Ada</t></si><si><t>Acme</t></si></sst>',
        ),
      },
      sheet1: {
        name: 'xl/worksheets/sheet1.xml',
        data: worksheet('<c r="A1" t="s"><v>0</v></c><c r="B1"><v>7</v></c>'),
      },
      sheet2: { name: 'xl/worksheets/sheet2.xml', data: worksheet('<c r="A1" t="s"><v>1</v></c>') },
    };
    const head = [contentTypes!, packageRels!, parts.workbook, parts.rels];
    const layouts = {
      'a worksheet last': buildZip([...head, parts.strings, parts.sheet1, parts.sheet2]),
      'the shared strings last': buildZip([...head, parts.sheet1, parts.sheet2, parts.strings]),
    };
    const expected = ['Sheet: Leads', 'Ada   7', 'Sheet: Accounts', 'Acme'];
    // exceljs's streaming unzip lost the last entry in about one read in ten; each read must be whole.
    for (const [layout, bytes] of Object.entries(layouts)) {
      const wrong: string[] = [];
      for (let run = 0; run < 300; run += 1) {
        const pages = await extractXlsx(bytes);
        if (JSON.stringify(pages) !== JSON.stringify(expected)) wrong.push(JSON.stringify(pages));
      }
      expect({ layout, wrong }).toEqual({ layout, wrong: [] });
      expect((await extractor.extract('xlsx', bytes)).pages).toEqual(expected);
    }
    // A part the workbook names but the archive lacks is refused, not read as empty.
    expect(await refusalOf(extractor.extract('xlsx', buildZip([...head, parts.strings, parts.sheet1])))).toMatch(
      /sheet "Accounts" names the part xl\/worksheets\/sheet2\.xml, which the archive does not hold/,
    );
    expect(await refusalOf(extractor.extract('xlsx', buildZip([...head, parts.sheet1, parts.sheet2])))).toMatch(
      /shared strings part xl\/sharedStrings\.xml is missing/,
    );
  });

  it('reads a hand-written minimal workbook (inline strings, no shared strings)', async () => {
    const { pages } = await extractor.extract('xlsx', buildZip(workbookEntries()));
    expect(pages).toEqual(['Sheet: Data', 'Hello   42']);
  });

  it('reads a CSV in UTF-8 or Windows-1252, with its delimiter found on the first line', async () => {
    expect(
      (await extractor.extract('csv', Buffer.from('\ufeffname;city\nZoë;"Saint-Étienne; Loire"\n', 'utf8'))).pages,
    ).toEqual(['name   city', 'Zoë   Saint-Étienne; Loire']);
    expect((await extractor.extract('csv', Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x09, 0x31, 0x0a]))).pages).toEqual([
      'café   1',
    ]);
  });
});

describe('refusing', () => {
  const extractor = extractorWith();

  it('refuses a password-protected PDF', async () => {
    expect(await refusalOf(extractor.extract('pdf', readFileSync(join(fixtures, 'password-protected.pdf'))))).toMatch(
      /password-protected/,
    );
  });

  it('refuses a truncated or damaged PDF, and an empty one', async () => {
    const pdf = await reportPdf(3);
    expect(await refusalOf(extractor.extract('pdf', pdf.subarray(0, Math.floor(pdf.length * 0.6))))).toMatch(
      /damaged or truncated/,
    );
    expect(await refusalOf(extractor.extract('pdf', Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\n')))).toMatch(
      /damaged or truncated/,
    );
    expect(await refusalOf(extractor.extract('pdf', Buffer.alloc(0)))).toMatch(/cannot be read|damaged/);
  });

  it('refuses a CSV with an unclosed quote', async () => {
    expect(await refusalOf(extractor.extract('csv', Buffer.from('a,b\n"unclosed,1\n')))).toMatch(
      /The CSV cannot be read/,
    );
  });

  it('refuses an encrypted workbook (an OLE file, as Office writes one), a zip that is no workbook, and a damaged archive', async () => {
    const ole = Buffer.concat([Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]), Buffer.alloc(512)]);
    expect(await refusalOf(extractor.extract('xlsx', ole))).toMatch(/encrypted \(password-protected\)/);
    expect(
      await refusalOf(extractor.extract('xlsx', buildZip([{ name: 'notes.txt', data: Buffer.from('hello') }]))),
    ).toMatch(/not an XLSX workbook/);
    const valid = await buildXlsx([{ name: 'A', rows: [['x']] }]);
    expect(await refusalOf(extractor.extract('xlsx', valid.subarray(0, valid.length - 30)))).toMatch(
      /archive is damaged/,
    );
  });
});

describe('zip bombs are refused from the central directory, before anything opens them', () => {
  const extractor = extractorWith();
  const bomb = (entries: Parameters<typeof buildZip>[0]) => buildZip([...workbookEntries(), ...entries]);

  it('refuses an entry that unpacks far more than its size', async () => {
    // 64 MiB of zeros deflate to about 64 KiB: a ratio of about 1000.
    const zeros = Buffer.alloc(64 * 1024 * 1024);
    const archive = bomb([{ name: 'xl/worksheets/sheet2.xml', data: zeros }]);
    expect(archive.length).toBeLessThan(1024 * 1024);
    expect(await refusalOf(extractor.extract('xlsx', archive))).toMatch(
      /xl\/worksheets\/sheet2\.xml unpacks \d+ times its size, more than 200; it is not read/,
    );
    // Refused from the central directory alone: the check that reads only the directory refuses it too.
    await expect(checkArchive(archive)).rejects.toThrow(/unpacks \d+ times/);
  });

  it('refuses an archive whose entries declare more than the total allowed, without inflating them', async () => {
    // Three entries, each within the ratio (600 KB of noise declaring 100 MiB), 300 MiB together.
    const noise = randomBytes(600 * 1024);
    const archive = bomb(
      ['a', 'b', 'c'].map((n) => ({
        name: `xl/media/${n}.bin`,
        data: noise,
        declaredUncompressedSize: 100 * 1024 * 1024,
      })),
    );
    expect(archiveLimits.uncompressedBytesMax).toBeLessThan(300 * 1024 * 1024);
    expect(await refusalOf(extractor.extract('xlsx', archive))).toMatch(/unpacks to more than 256 MiB; it is not read/);
  });

  it('refuses an archive of more entries than allowed', async () => {
    const many = Array.from({ length: archiveLimits.entriesMax }, (_, i) => ({
      name: `xl/media/${i}.txt`,
      data: Buffer.from('x'),
    }));
    expect(await refusalOf(extractor.extract('xlsx', bomb(many)))).toMatch(
      /holds 5005 entries, more than the 5000 allowed/,
    );
  });

  it('refuses an entry that yields more than it declares (a lying directory), when it is inflated to check', async () => {
    const archive = bomb([
      { name: 'xl/media/liar.bin', data: Buffer.alloc(4 * 1024 * 1024, 0x20), declaredUncompressedSize: 1024 },
    ]);
    // Declared 1 KiB from about 4 KiB compressed: within every limit until it is inflated.
    expect(await refusalOf(extractor.extract('xlsx', archive))).toMatch(/archive is damaged: .*too many bytes/);
  });
});

describe('limits', () => {
  it('stops a file that takes longer than the deadline, and the next file gets a fresh reader', async () => {
    const extractor = extractorWith({ extractSeconds: 1 });
    const slow = await reportPdf(400);
    expect(await refusalOf(extractor.extract('pdf', slow))).toBe(
      'Reading the file took longer than 1 s, the most allowed; it was stopped.',
    );
    const next = await extractor.extract('csv', Buffer.from('a,b\n'));
    expect(next.pages).toEqual(['a   b']);
    expect(next.startupMs).toBeGreaterThan(0);
  });

  it("stops a file that needs more than the reader's heap", async () => {
    const extractor = extractorWith({ extractHeapMb: 128 });
    // Five million one-character cells: far more than 128 MB of strings and arrays.
    const csv = Buffer.from('a,'.repeat(5_000_000) + 'a\n');
    expect(await refusalOf(extractor.extract('csv', csv))).toBe(
      'Reading the file needed more than the 128 MB of memory allowed; it was stopped.',
    );
    expect((await extractor.extract('csv', Buffer.from('still,reading\n'))).pages).toEqual(['still   reading']);
  });

  it("stops a file whose decoded streams grow the reader's memory past the limit (outside the heap)", async () => {
    const extractor = extractorWith({ extractRssGrowthMb: 150 });
    // A page whose content stream inflates from under a megabyte to 1 GiB of spaces.
    const doc = await PDFDocument.create();
    await doc.embedFont(StandardFonts.Helvetica);
    const page = doc.addPage([612, 792]);
    const compressed = await deflatedSpaces(1024 * 1024 * 1024);
    const stream = PDFRawStream.of(
      doc.context.obj({ Filter: 'FlateDecode', Length: PDFNumber.of(compressed.length) }),
      compressed,
    );
    page.node.set(PDFName.of('Contents'), doc.context.register(stream));
    const pdf = Buffer.from(await doc.save());
    expect(pdf.length).toBeLessThan(8 * 1024 * 1024);
    expect(await refusalOf(extractor.extract('pdf', pdf))).toBe(
      'Reading the file needed more than 150 MB of memory, the most allowed; it was stopped.',
    );
  });
});
