/**
 * The grid's keyset paging and sort indexes (docs/decisions/059-grid-at-a-million-rows.md) against
 * the grid's order as it was written before them: the same rows in the same order for every sort.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { countExactMax } from '../../domain/tables/tables.js';
import { sortIndexMinRows } from '../../store/tables/rows.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

interface SortOf {
  id: string;
  computed: boolean;
  desc: boolean;
}

/** listTableRows' order before keyset paging, kept here as the reference. */
function referenceOrder(sorts: SortOf[]) {
  const keys = sorts.map((s) => {
    const v = s.computed
      ? `(select c.value from table_cells c where c.column_id = '${s.id}'::uuid and c.row_id = r.id and c.state = 'done')`
      : `(r.cells -> '${s.id}'::text)`;
    const dir = s.desc ? 'desc' : 'asc';
    return `(coalesce(cell_text(${v}), '') = ''), cell_number(${v}) ${dir} nulls last, lower(cell_text(${v})) ${dir},`;
  });
  return `order by ${keys.join(' ')} r.seq`;
}

async function referenceIds(tableId: string, sorts: SortOf[], where = 'true') {
  const rows = await stack.sql.unsafe<{ id: string }[]>(
    `select r.id from table_rows r where r.table_id = $1 and ${where} ${referenceOrder(sorts)}`,
    [tableId],
  );
  return rows.map((r) => r.id);
}

const sortQuery = (sorts: SortOf[]) => sorts.map((s) => `sort=${s.id}${s.desc ? ':desc' : ''}`).join('&');

interface Page {
  rows: { id: string }[];
  next_cursor: string | null;
  total_count: number;
  total_count_exact: boolean;
}

async function page(tableId: string, query: string): Promise<Page> {
  const res = await api.get(`/tables/${tableId}/rows/?${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** Every row of the grid, a page at a time through next_cursor. */
async function walk(tableId: string, query: string, limit: number) {
  const ids: string[] = [];
  let after: string | null = null;
  for (;;) {
    const cursor: string = after === null ? '' : `&after=${encodeURIComponent(after)}`;
    const got = await page(tableId, `${query}&limit=${limit}${cursor}`);
    ids.push(...got.rows.map((r) => r.id));
    if (got.next_cursor === null) return ids;
    after = got.next_cursor;
  }
}

// Empties (absent and ""), numbers, numeric text, text differing in case, booleans, and cells too
// long for a sort index.
const mixed: unknown[] = [
  null,
  '',
  3,
  -1.5,
  '10',
  ' 7 ',
  'abc',
  'ABC',
  'b',
  'Abc',
  true,
  false,
  0,
  '1e3',
  'x'.repeat(1200),
  'x'.repeat(1100) + 'a',
  'é',
  'E',
  2.5,
  '2.5',
];
const few: unknown[] = ['p', 'Q', null, '', 1, '1', 'q'];

async function mixedTable(rows: number, withFormula: boolean) {
  const table = await api.table({ name: `Paging ${rows}` });
  const a = (await api.column(table.id, { kind: 'input', name: 'A' })).id;
  const b = (await api.column(table.id, { kind: 'input', name: 'B' })).id;
  const f = withFormula
    ? (await api.column(table.id, { kind: 'formula', name: 'F', formula: '{B} * 2' })).id
    : undefined;
  for (let start = 0; start < rows; start += 1000) {
    const batch = Array.from({ length: Math.min(1000, rows - start) }, (_, n) => {
      const i = start + n;
      return { cells: { [a]: mixed[(i * 7) % mixed.length], [b]: few[i % few.length] } };
    });
    expect((await api.post(`/tables/${table.id}/rows/bulk/`, { rows: batch })).statusCode).toBe(200);
  }
  return { tableId: table.id, a, b, f };
}

describe('grid paging', () => {
  let t: Awaited<ReturnType<typeof mixedTable>>;
  let combos: SortOf[][];
  beforeAll(async () => {
    t = await mixedTable(90, true);
    const input = (id: string, desc: boolean) => ({ id, computed: false, desc });
    const formula = (desc: boolean) => ({ id: t.f!, computed: true, desc });
    combos = [
      [],
      [input(t.a, false)],
      [input(t.a, true)],
      [input(t.b, false)],
      [input(t.b, true)],
      [formula(false)],
      [formula(true)],
      [input(t.b, false), input(t.a, true)],
      [input(t.b, true), input(t.a, false)],
      [input(t.b, true), input(t.a, true)],
      [formula(true), input(t.a, false)],
    ];
  });

  it('orders every sort as before, by offset and through next_cursor', async () => {
    for (const sorts of combos) {
      const expected = await referenceIds(t.tableId, sorts);
      const byOffset = (await page(t.tableId, `${sortQuery(sorts)}&limit=1000`)).rows.map((r) => r.id);
      expect(byOffset, sortQuery(sorts)).toEqual(expected);
      expect(await walk(t.tableId, sortQuery(sorts), 7), sortQuery(sorts)).toEqual(expected);
      const middle = (await page(t.tableId, `${sortQuery(sorts)}&limit=10&offset=30`)).rows.map((r) => r.id);
      expect(middle).toEqual(expected.slice(30, 40));
    }
  });

  it('pages a filtered grid through next_cursor, offset counting from the cursor', async () => {
    const sorts = [{ id: t.a, computed: false, desc: true }];
    const filter = `filter=${t.b}:is_not_empty`;
    const expected = await referenceIds(t.tableId, sorts, `coalesce(cell_text(r.cells -> '${t.b}'), '') <> ''`);
    expect(await walk(t.tableId, `${sortQuery(sorts)}&${filter}`, 9)).toEqual(expected);
    const first = await page(t.tableId, `${sortQuery(sorts)}&${filter}&limit=5`);
    expect(first).toMatchObject({ total_count: expected.length, total_count_exact: true });
    const skipped = await page(
      t.tableId,
      `${sortQuery(sorts)}&${filter}&limit=5&offset=3&after=${encodeURIComponent(first.next_cursor!)}`,
    );
    expect(skipped.rows.map((r) => r.id)).toEqual(expected.slice(8, 13));
  });

  it('answers null next_cursor on the last page, and 409 for a cursor of other sorts or a made-up one', async () => {
    const last = await page(t.tableId, 'limit=10&offset=85');
    expect(last.rows).toHaveLength(5);
    expect(last.next_cursor).toBeNull();
    const cursor = (await page(t.tableId, `sort=${t.a}&limit=5`)).next_cursor!;
    const status = async (query: string) => (await api.get(`/tables/${t.tableId}/rows/?${query}`)).statusCode;
    expect(await status(`sort=${t.a}:desc&after=${cursor}`)).toBe(409);
    expect(await status(`after=${cursor}`)).toBe(409);
    expect(await status('after=bm90LWEtY3Vyc29y')).toBe(409);
    const forged = Buffer.from(JSON.stringify({ k: ['1; drop table x'], s: '' })).toString('base64url');
    expect(await status(`after=${forged}`)).toBe(409);
  });
});

describe('a sort index', () => {
  it('reads a large grid through its index in the same order as before', { timeout: 240_000 }, async () => {
    const t = await mixedTable(sortIndexMinRows + 500, false);
    for (const [id, desc] of [
      [t.a, false],
      [t.a, true],
      [t.b, false],
      [t.b, true],
    ] as const) {
      const sorts = [{ id, computed: false, desc }];
      // The first sorted read starts the build; it is read without the index meanwhile.
      await page(t.tableId, `${sortQuery(sorts)}&limit=1`);
      const name = `table_rows_sort_${id.replace(/-/g, '')}_${desc ? 'd' : 'a'}`;
      for (let tries = 0; ; tries += 1) {
        const [ready] = await stack.sql`
          select 1 from pg_class c join pg_index i on i.indexrelid = c.oid
          where c.relname = ${name} and i.indisvalid`;
        if (ready) break;
        if (tries > 600) throw new Error(`${name} was not built`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const [long] =
        await stack.sql`select 1 from pg_class where relname = ${`table_rows_long_${id.replace(/-/g, '')}`}`;
      expect(long).toBeDefined();
      const expected = await referenceIds(t.tableId, sorts);
      const q = sortQuery(sorts);
      expect((await page(t.tableId, `${q}&limit=1000`)).rows.map((r) => r.id)).toEqual(expected.slice(0, 1000));
      expect((await page(t.tableId, `${q}&limit=300&offset=10000`)).rows.map((r) => r.id)).toEqual(
        expected.slice(10_000, 10_300),
      );
      const deep = await page(t.tableId, `${q}&limit=100&offset=${expected.length - 250}`);
      const after = await page(t.tableId, `${q}&limit=1000&after=${encodeURIComponent(deep.next_cursor!)}`);
      expect(after.rows.map((r) => r.id)).toEqual(expected.slice(expected.length - 150));
      expect(after.next_cursor).toBeNull();
    }
    // A filtered count stops at countExactMax.
    const filtered = await page(t.tableId, `filter=${t.a}:is_not_empty&limit=1`);
    expect(filtered).toMatchObject({ total_count: countExactMax, total_count_exact: false });
  });
});
