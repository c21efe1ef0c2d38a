/** The pure rules of chat attachments: the page layout, the kind of an upload, rows and page sizes. */
import { describe, expect, it } from 'vitest';
import {
  bytesLabel,
  capPageText,
  ChatAttachmentPagesQuerySchema,
  ChatAttachmentPagesResponseSchema,
  detectAttachmentKind,
  layoutLines,
  layoutPage,
  pageReadBytesMax,
  rowText,
  sheetHeading,
  unreadablePageText,
  type PositionedText,
} from '../../domain/assistant/attachments.js';

/** A run of Helvetica-like text: 0.5 em per character. */
const run = (text: string, x: number, y: number, size = 10): PositionedText => ({
  text,
  x,
  y,
  width: text.length * size * 0.5,
  size,
});

describe('layoutLines', () => {
  it('has no lines for a page without text, and ignores runs of spaces', () => {
    expect(layoutLines([])).toEqual([]);
    expect(layoutPage([])).toBe('');
    expect(layoutLines([run('   ', 50, 100), run('', 60, 100)])).toEqual([]);
  });

  it('puts runs on one baseline on one line, left to right, whatever order they come in', () => {
    expect(layoutLines([run('world', 80, 100), run('Hello', 50, 100)])).toEqual(['Hello world']);
  });

  it('joins runs with no gap (split glyphs, kerning), spaces a word gap, and cuts a column gap to three spaces', () => {
    // 5 characters at 5 pt each end at x 75.
    expect(layoutLines([run('Hello', 50, 100), run('s', 75, 100)])).toEqual(['Hellos']);
    expect(layoutLines([run('Hello', 50, 100), run('there', 78, 100)])).toEqual(['Hello there']);
    // Exactly two average character widths (10 pt) is still a word gap; past it, a column gap.
    expect(layoutLines([run('Hello', 50, 100), run('there', 85, 100)])).toEqual(['Hello there']);
    expect(layoutLines([run('Hello', 50, 100), run('there', 85.5, 100)])).toEqual(['Hello   there']);
    expect(layoutLines([run('Name', 50, 100), run('Amount', 400, 100)])).toEqual(['Name   Amount']);
  });

  it('keeps a line per baseline, top to bottom, and a baseline jitter within tolerance on its line', () => {
    expect(layoutLines([run('second', 50, 120), run('first', 50, 100), run('x', 200, 101.5)])).toEqual([
      'first   x',
      'second',
    ]);
    // A superscript 3 pt up beside 10 pt text stays on its line (within 0.4 of the larger size).
    expect(layoutLines([run('E = mc', 50, 100), run('2', 80, 97, 6)])).toEqual(['E = mc2']);
  });

  it('lays a table out one row per line with its columns side by side', () => {
    const columns = [50, 200, 350];
    const rows = [
      ['Name', 'City', 'Amount'],
      ['Ada Lovelace', 'London', '12.50'],
      ['Grace Hopper', 'New York', '7.25'],
    ];
    const items = rows.flatMap((cells, r) => cells.map((text, c) => run(text, columns[c]!, 100 + r * 15)));
    expect(layoutLines(items)).toEqual([
      'Name   City   Amount',
      'Ada Lovelace   London   12.50',
      'Grace Hopper   New York   7.25',
    ]);
  });

  it("gives a multi-line cell's continuation a line of its own, starting with three spaces", () => {
    const items = [
      run('Ada', 50, 100),
      run('12 Main Street', 200, 100),
      run('12.50', 350, 100),
      run('Springfield', 200, 115),
      run('Bob', 50, 130),
      run('7', 200, 130),
    ];
    expect(layoutLines(items)).toEqual(['Ada   12 Main Street   12.50', '   Springfield', 'Bob   7']);
  });

  it('does not indent a line that starts within a column gap of the left edge', () => {
    expect(layoutLines([run('Paragraph', 50, 100), run('indented', 58, 115)])).toEqual(['Paragraph', 'indented']);
  });

  it('counts a run drawn twice in the same place (fake bold) once', () => {
    expect(layoutLines([run('Total', 50, 100), run('Total', 50.4, 100), run('9', 200, 100)])).toEqual(['Total   9']);
  });

  it('drops control characters and turns tabs and line breaks inside a run into spaces', () => {
    expect(layoutLines([run('a\u0000b\tc\nd', 50, 100)])).toEqual(['ab c d']);
  });

  it("trims spaces at a run's ends and moves its start past the leading ones", () => {
    expect(layoutLines([run('  Hello ', 50, 100), run('there', 90, 100)])).toEqual(['Hello there']);
  });
});

describe('bytesLabel', () => {
  it('names a limit as a person reads it', () => {
    expect([20 * 1024 * 1024, 256 * 1024 * 1024, 256 * 1024, 1536, 1000].map(bytesLabel)).toEqual([
      '20 MiB',
      '256 MiB',
      '256 KiB',
      '1536 bytes',
      '1000 bytes',
    ]);
  });
});

describe('page text', () => {
  it('joins lines with line breaks', () => {
    expect(layoutPage([run('one', 50, 100), run('two', 50, 120)])).toBe('one\ntwo');
  });

  it('cuts a page past the read size on a character boundary and says so, within the size', () => {
    const long = 'é'.repeat(pageReadBytesMax);
    const cut = capPageText(long);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(pageReadBytesMax);
    expect(cut).toMatch(/^é+\n\[page cut at 256 KiB of text\]$/);
    expect(capPageText('short')).toBe('short');
    const exactly = 'a'.repeat(pageReadBytesMax);
    expect(capPageText(exactly)).toBe(exactly);
  });

  it('says which page could not be read and why, counting from 1', () => {
    expect(unreadablePageText(3, 'Bad XRef entry\n')).toBe('[page 3 could not be read: Bad XRef entry]');
    expect(unreadablePageText(1, '')).toBe('[page 1 could not be read: unknown error]');
  });
});

describe('spreadsheet rows', () => {
  it('joins cells by three spaces, drops empty trailing cells and keeps empty middle ones', () => {
    expect(rowText(['a', 'b', 'c'])).toBe('a   b   c');
    expect(rowText(['a', '', 'c', '', ' '])).toBe('a      c');
    expect(rowText(['', '', ''])).toBe('');
    expect(rowText([' line\none ', 'x'])).toBe('line one   x');
  });

  it('starts a sheet with its name', () => {
    expect(sheetHeading('Q3 sales')).toBe('Sheet: Q3 sales');
  });
});

describe('detectAttachmentKind', () => {
  const bytes = (s: string) => new Uint8Array(Buffer.from(s, 'latin1'));
  const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]);
  const ole = new Uint8Array([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0x00]);

  it('reads a PDF by its header, whatever its name, even after some leading bytes', () => {
    expect(detectAttachmentKind(bytes('%PDF-1.7\n'), 'report.pdf', 'application/pdf')).toBe('pdf');
    expect(detectAttachmentKind(bytes('%PDF-1.4\n'), 'report.bin', undefined)).toBe('pdf');
    expect(detectAttachmentKind(bytes(`${' '.repeat(500)}%PDF-1.4`), 'scan', undefined)).toBe('pdf');
  });

  it('reads a zip archive or an encrypted Office file named .xlsx as a workbook, and refuses another archive', () => {
    expect(detectAttachmentKind(zip, 'Book.XLSX', undefined)).toBe('xlsx');
    expect(detectAttachmentKind(ole, 'locked.xlsx', undefined)).toBe('xlsx');
    expect(
      detectAttachmentKind(zip, 'upload', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'),
    ).toBe('xlsx');
    expect(detectAttachmentKind(zip, 'photos.zip', 'application/zip')).toEqual({
      refused: expect.stringContaining('archive'),
    });
    expect(detectAttachmentKind(zip, 'report.docx', undefined)).toEqual({
      refused: expect.stringContaining('not a .xlsx'),
    });
  });

  it('reads text named .csv or sent as text/csv, and refuses binary data so named', () => {
    expect(detectAttachmentKind(bytes('a,b\n1,2\n'), 'data.csv', 'application/octet-stream')).toBe('csv');
    expect(detectAttachmentKind(bytes('a;b\n'), 'export', 'text/csv; charset=utf-8')).toBe('csv');
    expect(detectAttachmentKind(new Uint8Array(0), 'empty.csv', undefined)).toBe('csv');
    expect(detectAttachmentKind(new Uint8Array([0x61, 0x00, 0x62]), 'data.csv', 'text/csv')).toEqual({
      refused: expect.stringContaining('binary'),
    });
  });

  it('refuses a file whose name claims a kind its bytes do not have, and every other kind', () => {
    expect(detectAttachmentKind(bytes('hello'), 'fake.pdf', 'application/pdf')).toEqual({
      refused: expect.stringContaining('%PDF-'),
    });
    expect(detectAttachmentKind(bytes('hello'), 'fake.xlsx', undefined)).toEqual({
      refused: expect.stringContaining('not an XLSX'),
    });
    expect(detectAttachmentKind(bytes('hello'), 'notes.txt', 'text/plain')).toEqual({
      refused: expect.stringContaining('not a PDF, an XLSX or a CSV'),
    });
    expect(detectAttachmentKind(new Uint8Array([0x89, 0x50, 0x4e, 0x47]), 'photo.png', 'image/png')).toEqual({
      refused: expect.any(String),
    });
  });
});

describe('the page read schemas', () => {
  it('defaults offset to 0 and limit to 50, and bounds them', () => {
    expect(ChatAttachmentPagesQuerySchema.parse({})).toEqual({ offset: 0, limit: 50 });
    expect(ChatAttachmentPagesQuerySchema.parse({ offset: '3', limit: '1' })).toEqual({ offset: 3, limit: 1 });
    expect(ChatAttachmentPagesQuerySchema.parse({ limit: '50' }).limit).toBe(50);
    for (const bad of [{ offset: '-1' }, { limit: '0' }, { limit: '51' }, { offset: '1.5' }, { limit: 'all' }]) {
      expect(ChatAttachmentPagesQuerySchema.safeParse(bad).success).toBe(false);
    }
  });

  it("has exactly the fields of the interface spec's Chat attachment pages, all required", () => {
    const shape = ChatAttachmentPagesResponseSchema.shape;
    expect(Object.keys(shape).sort()).toEqual([
      'attachment_id',
      'filename',
      'next_offset',
      'offset',
      'page_count',
      'pages',
    ]);
    const read = {
      attachment_id: crypto.randomUUID(),
      filename: 'a.pdf',
      offset: 0,
      pages: [''],
      page_count: 1,
      next_offset: null,
    };
    expect(ChatAttachmentPagesResponseSchema.parse(read)).toEqual(read);
    for (const field of Object.keys(shape)) {
      const { [field]: _dropped, ...without } = read as Record<string, unknown>;
      expect(ChatAttachmentPagesResponseSchema.safeParse(without).success, field).toBe(false);
    }
  });
});
