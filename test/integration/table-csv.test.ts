import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { csvBytesMax, csvMapMax } from '../../domain/tables/tables.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

interface Report {
  lines_read: number;
  rows_added: number;
  rejected_count: number;
  rejected: { line: number; reason: string }[];
  columns_created: { id: string; name: string }[];
  mapping: { header: string; column_id: string | null }[];
}

function upload(tableId: string, body: string | Buffer | Readable, query = '', headers: Record<string, string> = {}) {
  return stack.app.inject({
    method: 'POST',
    url: `/tables/${tableId}/csv/${query}`,
    headers: { ...withKey(paid.apiKey), 'content-type': 'text/csv', ...headers },
    payload: body,
  });
}

async function imported(body: string | Buffer, query = '', existing: object[] = []) {
  const table = await api.table({ name: 'Import' });
  for (const column of existing) await api.column(table.id, column);
  const res = await upload(table.id, body, query);
  expect(res.statusCode, res.body).toBe(200);
  return { table, report: res.json<Report>() };
}

/** The table's rows as the grid shows them, by column name. */
async function rowsOf(tableId: string) {
  const columns = (await api.get(`/tables/${tableId}/columns/`)).json().columns as { id: string; name: string }[];
  const rows = (await api.get(`/tables/${tableId}/rows/?limit=1000`)).json().rows as {
    cells: Record<string, unknown>;
  }[];
  return rows.map((r) =>
    Object.fromEntries(columns.filter((c) => c.id in r.cells).map((c) => [c.name, r.cells[c.id]])),
  );
}

const exported = async (tableId: string, query = '') => {
  const res = await api.get(`/tables/${tableId}/csv/${query}`);
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
  return res.body;
};

describe('CSV upload', () => {
  it('judges the most map entries, and one more, by its schema over real HTTP, not by a header-size limit', async () => {
    const table = await api.table({ name: 'Many maps' });
    const address = await stack.app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const post = (entries: number) =>
        fetch(
          `${address}/tables/${table.id}/csv/?${Array.from({ length: entries }, () => `map=${randomUUID()}%3A999`).join('&')}`,
          {
            method: 'POST',
            headers: { ...withKey(paid.apiKey), 'content-type': 'text/csv', 'x-padding': 'p'.repeat(8000) },
            body: 'a\n1\n',
          },
        );
      // At the bound the ids are unknown columns (409); past it the query itself is refused (422).
      expect((await post(csvMapMax)).status).toBe(409);
      const past = await post(csvMapMax + 1);
      expect(past.status).toBe(422);
      expect(((await past.json()) as { issues: { loc: string[] }[] }).issues[0]!.loc).toEqual(['query', 'map']);
    } finally {
      stack.app.server.close();
    }
  });

  it('reads quoted fields with delimiters, doubled quotes and line breaks, and makes a column per header', async () => {
    const { table, report } = await imported('Name,Note\n"Lovelace, Ada","She said ""hi"""\n"Multi\nline",plain\n');
    expect(report).toMatchObject({ lines_read: 4, rows_added: 2, rejected_count: 0, rejected: [] });
    expect(report.columns_created.map((c) => c.name)).toEqual(['Name', 'Note']);
    expect(await rowsOf(table.id)).toEqual([
      { Name: 'Lovelace, Ada', Note: 'She said "hi"' },
      { Name: 'Multi\nline', Note: 'plain' },
    ]);
    expect((await api.get(`/tables/${table.id}/`)).json().row_count).toBe(2);
  });

  it('drops a byte order mark and accepts CRLF and CR line endings', async () => {
    const { table, report } = await imported(
      Buffer.from('\uFEFFName,City\r\nAda,London\rBob,"Ber\r\nlin"\r\n', 'utf8'),
    );
    expect(report.columns_created.map((c) => c.name)).toEqual(['Name', 'City']);
    expect(report.lines_read).toBe(4);
    expect(await rowsOf(table.id)).toEqual([
      { Name: 'Ada', City: 'London' },
      { Name: 'Bob', City: 'Ber\nlin' },
    ]);
  });

  it('reports each bad line with its line number while every good line lands', async () => {
    const body = [
      'Name,Score', // 1
      'Ada,1', // 2
      'too,many,fields', // 3
      '', // 4: empty lines are passed over
      '"two\nlines",2', // 5-6
      'short', // 7
      `long,${'x'.repeat(10_001)}`, // 8
      'nul,\u0000', // 9
      'a "stray" quote,3', // 10: kept as text
      `ok,${'y'.repeat(10_000)}`, // 11
      'last,4', // 12
    ].join('\n');
    const { table, report } = await imported(body);
    expect(report.rows_added).toBe(5);
    expect(report.rejected_count).toBe(4);
    expect(report.rejected).toEqual([
      { line: 3, reason: 'The line has 3 fields; the header has 2.' },
      { line: 7, reason: 'The line has 1 fields; the header has 2.' },
      { line: 8, reason: 'The field under "Score" is longer than 10000 characters.' },
      { line: 9, reason: 'The field under "Score" contains a NUL character.' },
    ]);
    expect(report.lines_read).toBe(12);
    expect((await rowsOf(table.id)).map((r) => r.Name)).toEqual(['Ada', 'two\nlines', 'a "stray" quote', 'ok', 'last']);
  });

  it('reports a quote that never closes with the lines it swallowed, keeping the lines before', async () => {
    const { table, report } = await imported('Name,Score\nAda,1\n"open,2\nBob,3\nCy,4\n');
    expect(report.rows_added).toBe(1);
    expect(report.rejected).toEqual([
      { line: 3, reason: 'A quote opened on this line never closes, so lines 3 to 5 could not be read.' },
    ]);
    expect(await rowsOf(table.id)).toEqual([{ Name: 'Ada', Score: '1' }]);
  });

  it('takes an empty file, a header alone, and blank lines without a row', async () => {
    const empty = await imported('');
    expect(empty.report).toEqual({
      lines_read: 0,
      rows_added: 0,
      rejected_count: 0,
      rejected: [],
      columns_created: [],
      mapping: [],
    });
    const bomOnly = await imported(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(bomOnly.report.rows_added).toBe(0);
    const header = await imported('Email\n');
    expect(header.report).toMatchObject({ lines_read: 1, rows_added: 0, columns_created: [{ name: 'Email' }] });
    const blank = await imported('\n\nEmail\n\n\nada@example.com\n\n');
    expect(blank.report).toMatchObject({ rows_added: 1, rejected_count: 0 });
    expect(await rowsOf(blank.table.id)).toEqual([{ Email: 'ada@example.com' }]);
  });

  it('maps headers onto columns: by name ignoring case, by an explicit map, skipping or creating the rest', async () => {
    const table = await api.table({ name: 'Mapped' });
    const email = await api.column(table.id, { kind: 'input', name: 'Email' });
    const company = await api.column(table.id, { kind: 'input', name: 'Company' });
    const formula = await api.column(table.id, { kind: 'formula', name: 'Domain', formula: 'lower({Email})' });
    const body = 'EMAIL,Employer,Domain,Extra,,Extra\nAda@Acme.com,Acme,ignored,e1,blank,e2\n';
    const res = await upload(table.id, body, `?map=${company.id}:2`);
    expect(res.statusCode).toBe(200);
    const report = res.json<Report>();
    // A header named like a computed column is not written; blank and repeated headers get names of their own.
    expect(report.columns_created.map((c) => c.name)).toEqual(['Domain (2)', 'Extra', 'Column 5', 'Extra (2)']);
    expect(report.mapping.map((m) => m.column_id)).toEqual([
      email.id,
      company.id,
      ...report.columns_created.map((c) => c.id),
    ]);
    const [row] = (await api.get(`/tables/${table.id}/rows/`)).json().rows;
    expect(row.cells[email.id]).toBe('Ada@Acme.com');
    expect(row.cells[company.id]).toBe('Acme');
    expect(row.computed[formula.id].value).toBe('ada@acme.com');

    const skipped = await upload(table.id, 'Email,Unknown\nbob@example.com,x\n', '?unmapped=skip');
    expect(skipped.json()).toMatchObject({
      rows_added: 1,
      columns_created: [],
      mapping: [{ column_id: email.id }, { column_id: null }],
    });
    const semicolons = await upload(table.id, 'Email;Company\nc@example.com;"C; Ltd"\n', '?delimiter=%3B');
    expect(semicolons.json()).toMatchObject({ rows_added: 1, columns_created: [] });
    expect((await rowsOf(table.id)).at(-1)).toMatchObject({ Email: 'c@example.com', Company: 'C; Ltd' });
  });

  it('refuses an upload as a whole, writing nothing, for a computed or unknown column in the map, or too many columns', async () => {
    const table = await api.table({ name: 'Refused' });
    const formula = await api.column(table.id, { kind: 'formula', name: 'F', formula: '1' });
    expect((await upload(table.id, 'F\n1\n', `?map=${formula.id}:1`)).statusCode).toBe(409);
    expect((await upload(table.id, 'A\n1\n', '?map=00000000-0000-4000-8000-000000000000:1')).statusCode).toBe(409);
    const input = await api.column(table.id, { kind: 'input', name: 'A' });
    expect((await upload(table.id, 'A\n1\n', `?map=${input.id}:2`)).statusCode).toBe(409);
    expect((await upload(table.id, 'A\n1\n', `?map=${input.id}:0`)).statusCode).toBe(422);
    const wide = Array.from({ length: 500 }, (_, i) => `c${i}`).join(',');
    expect((await upload(table.id, `${wide}\n${wide}\n`)).statusCode).toBe(409);
    expect((await api.get(`/tables/${table.id}/`)).json().row_count).toBe(0);
    expect((await api.get(`/tables/${table.id}/columns/`)).json().columns).toHaveLength(2);
    expect((await upload(table.id, 'A\n1\n', '?unmapped=maybe')).statusCode).toBe(422);
  });

  it('answers 415 to a body that is not text/csv and 404 to a table it cannot see', async () => {
    const table = await api.table({ name: 'Types' });
    const json = await stack.app.inject({
      method: 'POST',
      url: `/tables/${table.id}/csv/`,
      headers: withKey(paid.apiKey),
      payload: { a: 1 },
    });
    expect(json.statusCode).toBe(415);
    expect((await upload('00000000-0000-4000-8000-000000000000', 'A\n1\n')).statusCode).toBe(404);
  });

  it('lists the first 1000 rejected lines and counts them all', async () => {
    const lines = ['A,B', ...Array.from({ length: 1500 }, (_, i) => (i % 2 === 0 ? `bad${i}` : `good,${i}`))];
    const { report } = await imported(lines.join('\n'));
    expect(report).toMatchObject({ rows_added: 750, rejected_count: 750 });
    expect(report.rejected).toHaveLength(750);
    const many = await imported(['A,B', ...Array.from({ length: 2500 }, () => 'bad')].join('\n'));
    expect(many.report.rejected_count).toBe(2500);
    expect(many.report.rejected).toHaveLength(1000);
    expect(many.report.rejected.map((r) => r.line)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 2));
  });
});

describe('CSV upload size', () => {
  /** A CSV of exactly `size` bytes made as it is read: rows of 10,000-character fields. */
  function csvOfSize(size: number): Readable {
    const header = 'Id,Note\n';
    return Readable.from(
      (function* () {
        yield header;
        let left = size - header.length;
        for (let id = 0; left > 0; id += 1) {
          const prefix = `${id},`;
          const note = Math.max(1, Math.min(10_000, left - prefix.length - 1));
          const line = `${prefix}${'n'.repeat(note)}\n`.slice(0, left);
          left -= line.length;
          yield line;
        }
      })(),
    );
  }

  it('takes a 50 MiB file streamed, every line landing, and refuses one byte more with nothing written', async () => {
    const table = await api.table({ name: 'Fifty' });
    const res = await upload(table.id, csvOfSize(csvBytesMax));
    expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
    const report = res.json<Report>();
    expect(report.rejected_count).toBe(0);
    expect(report.rows_added).toBeGreaterThan(5000);
    const [bytes] = await stack.sql<{ n: number }[]>`
      select sum(octet_length(c.value))::bigint as n from table_rows r, jsonb_each_text(r.cells) c where r.table_id = ${table.id}`;
    // Every byte but the header and each line's comma and line break is a value that landed.
    expect(bytes!.n).toBe(csvBytesMax - 'Id,Note\n'.length - 2 * report.rows_added);

    const over = await api.table({ name: 'Fifty and one' });
    const refused = await upload(over.id, csvOfSize(csvBytesMax + 1));
    expect(refused.statusCode).toBe(413);
    expect((await api.get(`/tables/${over.id}/`)).json().row_count).toBe(0);
    expect((await api.get(`/tables/${over.id}/columns/`)).json().columns).toEqual([]);
    const declared = await upload(over.id, 'A\n1\n', '', { 'content-length': String(csvBytesMax + 1) });
    expect(declared.statusCode).toBe(413);
  }, 120_000);
});

describe('CSV export', () => {
  it('streams the values a person sees, quoted where needed, a computed cell in error as #ERROR', async () => {
    const table = await api.table({ name: 'Export' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const score = await api.column(table.id, { kind: 'input', name: 'Score' });
    await api.column(table.id, { kind: 'formula', name: 'Double', formula: '{Score} * 2' });
    await api.post(`/tables/${table.id}/rows/bulk/`, {
      rows: [
        { cells: { [name.id]: 'Lovelace, "Ada"', [score.id]: 1.5 } },
        { cells: { [name.id]: 'Multi\nline', [score.id]: 'n/a' } },
        { cells: { [name.id]: true } },
      ],
    });
    expect(await exported(table.id)).toBe(
      'Name,Score,Double\n"Lovelace, ""Ada""",1.5,3\n"Multi\nline",n/a,#ERROR\ntrue,,#ERROR\n',
    );
  });

  it('exports through a view: its columns in order, its filters and sorts, or the query’s', async () => {
    const table = await api.table({ name: 'Export view' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const city = await api.column(table.id, { kind: 'input', name: 'City' });
    const score = await api.column(table.id, { kind: 'input', name: 'Score' });
    await api.post(`/tables/${table.id}/rows/bulk/`, {
      rows: [
        ['Ada', 'London', 3],
        ['Bob', 'Paris', 1],
        ['Cy', 'London', 2],
      ].map(([n, c, s]) => ({ cells: { [name.id]: n, [city.id]: c, [score.id]: s } })),
    });
    const view = (
      await api.post(`/tables/${table.id}/views/`, {
        name: 'London',
        filters: [{ column_id: city.id, op: 'eq', value: 'London' }],
        sorts: [{ column_id: score.id }],
        hidden_column_ids: [city.id],
        column_order: [score.id],
      })
    ).json();
    expect(await exported(table.id, `?view_id=${view.id}`)).toBe('Score,Name\n2,Cy\n3,Ada\n');
    expect(await exported(table.id, `?view_id=${view.id}&sort=${name.id}:desc&filter=${score.id}:gte:1`)).toBe(
      'Score,Name\n2,Cy\n1,Bob\n3,Ada\n',
    );
    expect(
      (await api.get(`/tables/${table.id}/csv/?filter=00000000-0000-4000-8000-000000000000:is_empty`)).statusCode,
    ).toBe(409);
  });

  it('round-trips: an exported table uploads into an equal table', async () => {
    const source = await imported('Name,Note\n"A, B","x ""y"""\nC,\n"D\nE",z\n');
    const csv = await exported(source.table.id);
    const copy = await imported(csv);
    expect(copy.report.rejected).toEqual([]);
    expect(await rowsOf(copy.table.id)).toEqual(await rowsOf(source.table.id));
    expect(await exported(copy.table.id)).toBe(csv);
  });

  it('exports a table with no rows as its header line, and one with no columns as nothing', async () => {
    const table = await api.table({ name: 'Empty export' });
    expect(await exported(table.id)).toBe('\n');
    await api.column(table.id, { kind: 'input', name: 'Only' });
    expect(await exported(table.id)).toBe('Only\n');
  });
});
