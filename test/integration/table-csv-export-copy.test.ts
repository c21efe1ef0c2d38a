/**
 * The CSV export's `COPY … TO` path (store/tables/row-export.ts) against the rows rendered in JS
 * (exportCsvRendered, displayValue / displayComputed): byte for byte the same CSV for every kind of
 * value a cell can hold, through views, filters and sorts on input and formula columns.
 */
import type { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { RowQuerySchema, type CellValue } from '../../domain/tables/tables.js';
import { exportCsv, exportCsvRendered } from '../../services/tables/csv.js';
import { loadColumns } from '../../store/tables/columns.js';
import { copyRenders, exportGridCopy } from '../../store/tables/row-export.js';
import { resolveGrid } from '../../store/tables/views.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

const text = async (stream: Readable) => {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
};

const values: CellValue[] = [
  'plain',
  '',
  ' ',
  '  leading',
  'trailing  ',
  'comma, here',
  'quote " inside',
  '"quoted"',
  'line\nbreak',
  'carriage\rreturn',
  'crlf\r\nend',
  'tab\there',
  'back\\slash',
  '\\.',
  '\\N',
  'NULL',
  "it's",
  '#ERROR',
  'ünïcødé ✓ 🚀',
  '12',
  '1e21',
  'true',
  '{"a": 1}',
  0,
  -0,
  1,
  -1,
  1.5,
  -2.25,
  0.1 + 0.2,
  1 / 3,
  12345.678,
  1e15,
  1e16,
  2 ** 53,
  2 ** 53 + 2,
  123456789012345680000,
  1e20,
  1e21,
  1.5e21,
  -1.2345678901234567e25,
  1.7976931348623157e308,
  -1.5e300,
  0.001,
  1e-6,
  0.000001234,
  1e-7,
  1.5e-7,
  -1.2345e-10,
  5e-324,
  true,
  false,
  null,
];

describe('CSV export through COPY', () => {
  it('writes exactly what the rows rendered in JS write, through views, filters and sorts', async () => {
    const table = await api.table({ name: 'Export copy' });
    const a = await api.column(table.id, { kind: 'input', name: 'A, "first"' });
    const b = await api.column(table.id, { kind: 'input', name: 'B' });
    const c = await api.column(table.id, { kind: 'input', name: 'C' });
    const n = values.length;
    const rows = Array.from({ length: 3 * n }, (_, i) => ({
      cells: {
        [a.id]: values[i % n]!,
        [b.id]: values[(i * 7 + 3) % n]!,
        // Every fifth row has no C at all.
        ...(i % 5 === 4 ? {} : { [c.id]: values[(i * 3 + 1) % n]! }),
      },
    }));
    const added = await api.post(`/tables/${table.id}/rows/bulk/`, { rows });
    expect(added.statusCode, added.body).toBe(200);
    expect(added.json().failed).toBe(0);
    const double = await api.column(table.id, { kind: 'formula', name: 'Double', formula: '{B} * 2' });
    const third = await api.column(table.id, { kind: 'formula', name: 'Third', formula: '{B} / 3' });
    const joined = await api.column(table.id, {
      kind: 'formula',
      name: 'Joined',
      formula: 'concat(upper({A}), " / ", {C})',
    });
    const view: { id: string } = (
      await api.post(`/tables/${table.id}/views/`, {
        name: 'Some',
        filters: [{ column_id: c.id, op: 'is_not_empty', value: '' }],
        sorts: [{ column_id: b.id, direction: 'desc' }],
        hidden_column_ids: [a.id],
        column_order: [joined.id, c.id],
      })
    ).json();

    const queries: Record<string, unknown>[] = [
      {},
      { view_id: view.id },
      { view_id: view.id, sort: [`${a.id}:asc`, `${double.id}:desc`] },
      { sort: `${a.id}` },
      { sort: [`${b.id}:desc`, `${c.id}`] },
      { sort: `${third.id}:desc` },
      { filter: `${a.id}:contains:"`, sort: `${c.id}:desc` },
      { filter: [`${a.id}:contains:it's`, `${b.id}:contains:\\`], filter_mode: 'any' },
      { filter: `${b.id}:gte:1`, sort: `${b.id}` },
      { filter: `${b.id}:lt:0.001` },
      { filter: `${c.id}:is_empty` },
      { filter: `${a.id}:eq:back\\slash` },
      { filter: `${a.id}:starts_with: ` },
      { filter: [`${a.id}:neq:plain`, `${c.id}:ends_with:e`] },
      { filter: `${double.id}:gt:2`, sort: `${joined.id}` },
      { filter: `${joined.id}:contains:ü` },
      { view_id: view.id, filter: `${a.id}:not_contains:,` },
    ];
    const workspaceId = paid.workspaceId;
    for (const raw of queries) {
      const query = RowQuerySchema.parse(raw);
      const rendered = await text(await exportCsvRendered(stack.sql, workspaceId, table.id, query));
      // The COPY path is the one taken here, and what it writes is the rendered rows' bytes.
      const columns = await loadColumns(stack.sql, table.id);
      const grid = await resolveGrid(stack.sql, table.id, columns, query);
      const shown = grid.columnIds.map((id) => columns.byId.get(id)!);
      expect(copyRenders(shown)).toBe(true);
      const copied = await exportGridCopy(stack.sql, table.id, columns, grid, shown);
      expect(copied).not.toBeNull();
      const header = rendered.subarray(0, rendered.indexOf(0x0a) + 1);
      expect(Buffer.concat([header, await text(copied!)]).toString('utf8'), JSON.stringify(raw)).toBe(
        rendered.toString('utf8'),
      );
      const exported = await text(await exportCsv(stack.sql, workspaceId, table.id, query));
      expect(exported.equals(rendered), JSON.stringify(raw)).toBe(true);
      expect(rendered.toString('utf8').split('\n').length).toBeGreaterThan(1);
    }

    // Through HTTP too, the same bytes.
    const res = await api.get(`/tables/${table.id}/csv/?view_id=${view.id}`);
    expect(res.statusCode).toBe(200);
    const rendered = await text(
      await exportCsvRendered(stack.sql, workspaceId, table.id, RowQuerySchema.parse({ view_id: view.id })),
    );
    expect(res.rawPayload.equals(rendered)).toBe(true);
  });

  it('keeps rendering in JS what COPY cannot write the same way: one column, a lone \\.', async () => {
    const table = await api.table({ name: 'One column' });
    const only = await api.column(table.id, { kind: 'input', name: 'Only' });
    await api.post(`/tables/${table.id}/rows/bulk/`, { rows: [{ cells: { [only.id]: '\\.' } }] });
    const res = await api.get(`/tables/${table.id}/csv/`);
    expect(res.body).toBe('Only\n\\.\n');
  });

  it('gives its connection back when the reader stops early', async () => {
    const table = await api.table({ name: 'Stopped' });
    const x = await api.column(table.id, { kind: 'input', name: 'X' });
    const y = await api.column(table.id, { kind: 'input', name: 'Y' });
    for (let k = 0; k < 4; k += 1)
      await api.post(`/tables/${table.id}/rows/bulk/`, {
        rows: Array.from({ length: 1000 }, (_, i) => ({ cells: { [x.id]: 'x'.repeat(500), [y.id]: i } })),
      });
    for (let k = 0; k < 12; k += 1) {
      const stream = await exportCsv(stack.sql, paid.workspaceId, table.id, RowQuerySchema.parse({}));
      for await (const chunk of stream) {
        expect(chunk).toBeDefined();
        break;
      }
    }
    // More stopped exports than the pool has connections, and queries still answer.
    const [row] = await stack.sql<{ one: number }[]>`select 1 as one`;
    expect(row!.one).toBe(1);
  });
});
