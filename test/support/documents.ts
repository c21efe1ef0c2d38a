/**
 * Documents built for the chat-attachment tests and the benchmark: real PDFs with pdf-lib (text
 * placed where a table would put it, a blank page, a page holding only an image), workbooks with
 * exceljs, and zip archives written byte by byte (to declare sizes a real zip tool never would).
 */
import ExcelJS from 'exceljs';
import { PDFDocument, StandardFonts, type PDFFont, type PDFPage } from 'pdf-lib';
import { crc32, deflateRawSync, deflateSync } from 'node:zlib';

export const pageSize: [number, number] = [612, 792];

/** Text drawn at `x` with its baseline `top` points below the page's top edge. */
export interface Placed {
  text: string;
  x: number;
  top: number;
  size?: number;
}

/** A page: text runs, or an image filling part of it (a scanned page has no text). */
export type PageContent = { texts: Placed[] } | { image: 'gray' } | { blank: true };

/** Cells of a table row; a cell with line breaks is drawn over several lines, top-aligned. */
export interface TableSpec {
  left?: number;
  top?: number;
  /** Each column's left edge. */
  columns: number[];
  rows: string[][];
  size?: number;
  /** Baseline to baseline within a cell and between rows. */
  lineHeight?: number;
}

/** The runs of a table: each row starts below the previous row's last line. */
export function tableTexts(spec: TableSpec): Placed[] {
  const size = spec.size ?? 10;
  const lineHeight = spec.lineHeight ?? size * 1.5;
  let top = spec.top ?? 100;
  const texts: Placed[] = [];
  for (const row of spec.rows) {
    let lines = 1;
    row.forEach((cell, c) => {
      const cellLines = cell.split('\n');
      lines = Math.max(lines, cellLines.length);
      cellLines.forEach((line, i) => {
        if (line) texts.push({ text: line, x: spec.columns[c]!, top: top + i * lineHeight, size });
      });
    });
    top += lines * lineHeight;
  }
  return texts;
}

/** A small gray PNG, written by hand (one IDAT), for a page that holds only an image. */
export function grayPng(width = 64, height = 64): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), 8 + data.length);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 0; // grayscale
  const raw = Buffer.alloc((width + 1) * height);
  for (let y = 0; y < height; y += 1)
    for (let x = 0; x < width; x += 1) raw[y * (width + 1) + 1 + x] = (x * 4 + y * 2) % 256;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A PDF of these pages, text in Helvetica (a standard font, not embedded, as many generated PDFs have). */
export async function buildPdf(pages: PageContent[], options: { useObjectStreams?: boolean } = {}): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font: PDFFont = await doc.embedFont(StandardFonts.Helvetica);
  const image = pages.some((p) => 'image' in p) ? await doc.embedPng(grayPng()) : null;
  for (const content of pages) {
    const page: PDFPage = doc.addPage(pageSize);
    if ('texts' in content) {
      for (const t of content.texts)
        page.drawText(t.text, { x: t.x, y: pageSize[1] - t.top, size: t.size ?? 10, font });
    } else if ('image' in content) {
      page.drawImage(image!, { x: 50, y: 300, width: 400, height: 400 });
    }
  }
  return Buffer.from(await doc.save({ useObjectStreams: options.useObjectStreams ?? true }));
}

/** `pages` pages of a report: a title, a line of prose and a 30-row table of four columns. */
export async function reportPdf(pages: number): Promise<Buffer> {
  const content: PageContent[] = [];
  for (let p = 0; p < pages; p += 1) {
    const rows = Array.from({ length: 30 }, (_, r) => [
      `Item ${p * 30 + r + 1}`,
      `Region ${r % 4}`,
      (r * 123.45).toFixed(2),
      r % 7 === 0 ? 'late' : 'ok',
    ]);
    content.push({
      texts: [
        { text: `Quarterly report, page ${p + 1}`, x: 50, top: 52, size: 16 },
        { text: 'Sales by item and region, in euros, as booked at the end of the quarter.', x: 50, top: 82, size: 11 },
        ...tableTexts({
          columns: [50, 200, 350, 480],
          rows: [['Item', 'Region', 'Amount', 'Status'], ...rows],
          top: 112,
          size: 10,
          lineHeight: 20,
        }),
      ],
    });
  }
  return buildPdf(content);
}

/** A workbook of these sheets, in this order. */
export async function buildXlsx(sheets: { name: string; rows: unknown[][] }[]): Promise<Buffer> {
  const workbook = new ExcelJS.Workbook();
  for (const sheet of sheets) {
    const ws = workbook.addWorksheet(sheet.name);
    for (const row of sheet.rows) ws.addRow(row);
  }
  return Buffer.from(await workbook.xlsx.writeBuffer());
}

export interface ZipEntrySpec {
  name: string;
  data: Buffer;
  /** Sizes to write in the central directory instead of the true ones (a lying archive). */
  declaredUncompressedSize?: number;
  /** Store instead of deflate. */
  stored?: boolean;
}

/** A zip archive written by hand: local headers, data, central directory, end record. */
export function buildZip(entries: ZipEntrySpec[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const compressed = entry.stored ? entry.data : deflateRawSync(entry.data, { level: 9 });
    const method = entry.stored ? 0 : 8;
    const crc = crc32(entry.data);
    const size = entry.declaredUncompressedSize ?? entry.data.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(compressed.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, compressed);
    centrals.push(central, name);
    offset += local.length + name.length + compressed.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** The entries of a minimal valid workbook, to which a test adds its bomb. */
export function workbookEntries(): ZipEntrySpec[] {
  const text = (s: string) => Buffer.from(s, 'utf8');
  return [
    {
      name: '[Content_Types].xml',
      data: text(
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
          '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>' +
          '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>' +
          '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>',
      ),
    },
    {
      name: '_rels/.rels',
      data: text(
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
          '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
      ),
    },
    {
      name: 'xl/workbook.xml',
      data: text(
        '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">' +
          '<sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>',
      ),
    },
    {
      name: 'xl/_rels/workbook.xml.rels',
      data: text(
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
          '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
      ),
    },
    {
      name: 'xl/worksheets/sheet1.xml',
      data: text(
        '<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>' +
          '<row r="1"><c r="A1" t="inlineStr"><is><t>Hello</t></is></c><c r="B1"><v>42</v></c></row></sheetData></worksheet>',
      ),
    },
  ];
}

/** The bytes of a multipart/form-data body with one file field (app.inject sends it as is). */
export function multipartBody(file: { field?: string; filename: string; contentType: string; data: Buffer }): {
  payload: Buffer;
  headers: Record<string, string>;
} {
  const boundary = `----attachment${Math.random().toString(16).slice(2)}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="${file.field ?? 'file'}"; filename="${file.filename}"\r\nContent-Type: ${file.contentType}\r\n\r\n`,
    'utf8',
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8');
  return {
    payload: Buffer.concat([head, file.data, tail]),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  };
}
