import { beforeAll, describe, expect, it } from 'vitest';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

const unknownId = '00000000-0000-4000-8000-000000000000';

async function tableWithColumns(...names: string[]) {
  const table = await api.table({ name: 'Rows' });
  const ids: Record<string, string> = {};
  for (const name of names) ids[name] = (await api.column(table.id, { kind: 'input', name })).id;
  return { table, ids };
}

const rowCount = async (tableId: string) => (await api.get(`/tables/${tableId}/`)).json().row_count;

describe('rows and cells', () => {
  it('adds, reads, changes and deletes a row, keeping row_count', async () => {
    const { table, ids } = await tableWithColumns('Name', 'Score', 'Active');
    const res = await api.post(`/tables/${table.id}/rows/`, {
      cells: { [ids.Name!]: 'Ada', [ids.Score!]: 9.5, [ids.Active!]: true },
    });
    expect(res.statusCode).toBe(201);
    const row = res.json();
    expect(row).toEqual({
      id: expect.any(String),
      table_id: table.id,
      cells: { [ids.Name!]: 'Ada', [ids.Score!]: 9.5, [ids.Active!]: true },
      computed: {},
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(await rowCount(table.id)).toBe(1);
    expect((await api.get(`/tables/${table.id}/rows/${row.id}/`)).json()).toEqual(row);

    // A cell left out keeps its value; null empties one.
    const changed = (
      await api.patch(`/tables/${table.id}/rows/${row.id}/`, { cells: { [ids.Score!]: 10, [ids.Active!]: null } })
    ).json();
    expect(changed.cells).toEqual({ [ids.Name!]: 'Ada', [ids.Score!]: 10 });
    expect((await api.post(`/tables/${table.id}/rows/`, {})).json().cells).toEqual({});
    expect(await rowCount(table.id)).toBe(2);

    expect((await api.del(`/tables/${table.id}/rows/${row.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/tables/${table.id}/rows/${row.id}/`)).statusCode).toBe(404);
    expect((await api.del(`/tables/${table.id}/rows/${row.id}/`)).statusCode).toBe(404);
    expect((await api.patch(`/tables/${table.id}/rows/${row.id}/`, { cells: {} })).statusCode).toBe(404);
    expect(await rowCount(table.id)).toBe(1);
  });

  it('bounds a text cell at 10,000 characters and takes only text, numbers, true/false or null', async () => {
    const { table, ids } = await tableWithColumns('Note');
    const write = (value: unknown) => api.post(`/tables/${table.id}/rows/`, { cells: { [ids.Note!]: value } });
    expect((await write('x'.repeat(10_000))).statusCode).toBe(201);
    const long = await write('x'.repeat(10_001));
    expect(long.statusCode).toBe(422);
    expect(long.json().issues[0].loc[0]).toBe('body');
    expect((await write({ nested: true })).statusCode).toBe(422);
    expect((await write(['a'])).statusCode).toBe(422);
    expect((await write('nul\u0000')).statusCode).toBe(422);
    expect((await api.post(`/tables/${table.id}/rows/`, { cells: { 'not-a-uuid': 'x' } })).statusCode).toBe(422);
  });

  it('refuses a cell of a column the table does not have (409), and a row of another table is 404', async () => {
    const { table, ids } = await tableWithColumns('Name');
    const other = await tableWithColumns('Name');
    expect((await api.post(`/tables/${table.id}/rows/`, { cells: { [unknownId]: 'x' } })).statusCode).toBe(409);
    expect((await api.post(`/tables/${table.id}/rows/`, { cells: { [other.ids.Name!]: 'x' } })).statusCode).toBe(409);
    const row = (
      await api.post(`/tables/${table.id}/rows/`, { cells: { [ids.Name!.toUpperCase()]: 'upper-case id' } })
    ).json();
    expect(row.cells).toEqual({ [ids.Name!]: 'upper-case id' });
    expect((await api.get(`/tables/${other.table.id}/rows/${row.id}/`)).statusCode).toBe(404);
    expect((await api.get(`/tables/${unknownId}/rows/`)).statusCode).toBe(404);
  });
});

describe('bulk rows', () => {
  it('adds a thousand rows where one bad row never sinks the other 999', async () => {
    const { table, ids } = await tableWithColumns('N', 'Note');
    const rows = Array.from({ length: 1000 }, (_, i) => ({ cells: { [ids.N!]: i, [ids.Note!]: `row ${i}` } }));
    rows[500] = { cells: { [ids.N!]: 500, [ids.Note!]: 'x'.repeat(10_001) } };
    const res = await api.post(`/tables/${table.id}/rows/bulk/`, { rows });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ succeeded: 999, failed: 1 });
    expect(body.results).toHaveLength(1000);
    expect(body.results[500]).toEqual({
      index: 500,
      id: null,
      status: 'rejected',
      detail: expect.stringContaining(`cells.${ids.Note}`),
    });
    expect(body.results[999]).toEqual({ index: 999, id: expect.any(String), status: 'created', detail: null });
    expect(await rowCount(table.id)).toBe(999);
    // Rows land in the order given.
    const first = (await api.get(`/tables/${table.id}/rows/?limit=3`))
      .json()
      .rows.map((r: { cells: Record<string, unknown> }) => r.cells[ids.N!]);
    expect(first).toEqual([0, 1, 2]);
  });

  it('answers a row with a NUL in a cell key, a row id or a value on its own, never the whole request', async () => {
    const { table, ids } = await tableWithColumns('N', 'Note');
    const created = await api.post(`/tables/${table.id}/rows/bulk/`, {
      rows: [{ cells: { [ids.N!]: 1 } }, { cells: { 'k\u0000': 1 } }, { cells: { [ids.Note!]: 'a\u0000b' } }],
    });
    expect(created.statusCode).toBe(200);
    expect(created.json().results.map((r: { status: string }) => r.status)).toEqual([
      'created',
      'rejected',
      'rejected',
    ]);
    const kept = created.json().results[0].id as string;
    const updated = await api.patch(`/tables/${table.id}/rows/bulk/`, {
      rows: [
        { id: kept, cells: { [ids.N!]: 2 } },
        { id: 'r\u0000', cells: {} },
      ],
    });
    expect(updated.statusCode).toBe(200);
    expect(updated.json().results.map((r: { status: string }) => r.status)).toEqual([
      'updated',
      expect.not.stringMatching(/^updated$/),
    ]);
    const deleted = await api.post(`/tables/${table.id}/rows/bulk-delete/`, { row_ids: ['r\u0000', kept] });
    expect(deleted.statusCode).toBe(200);
    expect(await rowCount(table.id)).toBe(0);
  });

  it('answers each kind of bad row on its own', async () => {
    const { table, ids } = await tableWithColumns('N');
    const formula = await api.column(table.id, { kind: 'formula', name: 'Twice', formula: '{N} * 2' });
    const res = (
      await api.post(`/tables/${table.id}/rows/bulk/`, {
        rows: [
          { cells: { [ids.N!]: 1 } },
          { cells: { [unknownId]: 1 } },
          { cells: { [formula.id]: 1 } },
          { cells: { [ids.N!]: { a: 1 } } },
          {},
        ],
      })
    ).json();
    expect(res.results.map((r: { status: string }) => r.status)).toEqual([
      'created',
      'rejected',
      'rejected',
      'rejected',
      'created',
    ]);
    expect(res.results[1].detail).toMatch(/no column/);
    expect(res.results[2].detail).toMatch(/computed/);
    const created = (await api.get(`/tables/${table.id}/rows/${res.results[0].id}/`)).json();
    expect(created.computed[formula.id].value).toBe(2);
  });

  it('answers 405 with the bulk paths’ own methods, not a 422 about a row id', async () => {
    const { table } = await tableWithColumns('N');
    const res = await api.get(`/tables/${table.id}/rows/bulk/`);
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('PATCH, POST');
    const del = await api.patch(`/tables/${table.id}/rows/bulk-delete/`, { row_ids: [unknownId] });
    expect({ status: del.statusCode, allow: del.headers.allow }).toEqual({ status: 405, allow: 'POST' });
    expect((await api.del(`/tables/${table.id}/rows/${unknownId}/`)).statusCode).toBe(404);
  });

  it('bounds a bulk request at 1 to 1000 rows', async () => {
    const { table } = await tableWithColumns('N');
    expect((await api.post(`/tables/${table.id}/rows/bulk/`, { rows: [] })).statusCode).toBe(422);
    expect(
      (await api.post(`/tables/${table.id}/rows/bulk/`, { rows: Array.from({ length: 1001 }, () => ({})) })).statusCode,
    ).toBe(422);
    expect((await api.patch(`/tables/${table.id}/rows/bulk/`, { rows: [] })).statusCode).toBe(422);
    expect(
      (
        await api.post(`/tables/${table.id}/rows/bulk-delete/`, {
          row_ids: Array.from({ length: 1001 }, () => unknownId),
        })
      ).statusCode,
    ).toBe(422);
    expect(
      (
        await api.post(`/tables/${table.id}/rows/bulk-delete/`, {
          row_ids: Array.from({ length: 1000 }, () => unknownId),
        })
      ).statusCode,
    ).toBe(200);
  });

  it('changes and deletes rows in bulk, answering each', async () => {
    const { table, ids } = await tableWithColumns('N');
    const formula = await api.column(table.id, { kind: 'formula', name: 'Plus one', formula: '{N} + 1' });
    const created = (
      await api.post(`/tables/${table.id}/rows/bulk/`, { rows: [1, 2, 3].map((n) => ({ cells: { [ids.N!]: n } })) })
    ).json();
    const [a, b, c] = created.results.map((r: { id: string }) => r.id);
    const updated = (
      await api.patch(`/tables/${table.id}/rows/bulk/`, {
        rows: [
          { id: a, cells: { [ids.N!]: 10 } },
          { id: unknownId, cells: {} },
          { id: 'not-an-id', cells: {} },
          { id: b, cells: { [ids.N!]: 'y'.repeat(10_001) } },
          { id: a, cells: { [ids.N!]: 11 } },
        ],
      })
    ).json();
    expect(updated.results.map((r: { status: string }) => r.status)).toEqual([
      'updated',
      'not_found',
      'rejected',
      'rejected',
      'rejected',
    ]);
    expect(updated).toMatchObject({ succeeded: 1, failed: 4 });
    expect((await api.get(`/tables/${table.id}/rows/${a}/`)).json().computed[formula.id].value).toBe(11);

    const deleted = (
      await api.post(`/tables/${table.id}/rows/bulk-delete/`, { row_ids: [a, c, a, unknownId, 'nope'] })
    ).json();
    expect(deleted.results.map((r: { status: string }) => r.status)).toEqual([
      'deleted',
      'deleted',
      'not_found',
      'not_found',
      'rejected',
    ]);
    expect(await rowCount(table.id)).toBe(1);
    expect((await api.get(`/tables/${table.id}/rows/`)).json().rows.map((r: { id: string }) => r.id)).toEqual([b]);
  });
});

describe('the grid: paging, filters, sorts', () => {
  let tableId: string;
  let col: Record<string, string>;
  let rowOf: Map<string, string>;
  beforeAll(async () => {
    const { table, ids } = await tableWithColumns('Name', 'Score', 'City');
    tableId = table.id;
    col = ids;
    col.Grade = (
      await api.column(table.id, { kind: 'formula', name: 'Grade', formula: '{Score} >= 50 ? "pass" : "fail"' })
    ).id;
    const people: [string, unknown, string | null][] = [
      ['Ada', 90, 'London'],
      ['bob', '7', 'Berlin'],
      ['Cy', 'n/a', 'Lisbon'],
      ['Dee', null, 'london'],
      ['Eve', 50, null],
      ['Fay', '100.5', 'Paris'],
    ];
    const res = (
      await api.post(`/tables/${table.id}/rows/bulk/`, {
        rows: people.map(([name, score, city]) => ({
          cells: { [ids.Name!]: name, [ids.Score!]: score, [ids.City!]: city },
        })),
      })
    ).json();
    rowOf = new Map(res.results.map((r: { id: string }, i: number) => [r.id, people[i]![0]]));
  });

  const names = async (query: string) => {
    const res = await api.get(`/tables/${tableId}/rows/?${query}`);
    expect(res.statusCode).toBe(200);
    return res.json().rows.map((r: { id: string }) => rowOf.get(r.id));
  };

  it('pages with limit 1 to 1000 and an offset, counting every match', async () => {
    const page = (await api.get(`/tables/${tableId}/rows/?limit=2&offset=2`)).json();
    expect(page).toMatchObject({ total_count: 6, limit: 2, offset: 2 });
    expect(page.rows.map((r: { id: string }) => rowOf.get(r.id))).toEqual(['Cy', 'Dee']);
    expect((await api.get(`/tables/${tableId}/rows/?limit=1000`)).statusCode).toBe(200);
    expect((await api.get(`/tables/${tableId}/rows/?limit=1001`)).statusCode).toBe(422);
    expect((await api.get(`/tables/${tableId}/rows/?limit=0`)).statusCode).toBe(422);
    expect((await api.get(`/tables/${tableId}/rows/?offset=-1`)).statusCode).toBe(422);
    expect(await names('offset=10')).toEqual([]);
  });

  it('filters text ignoring case, numbers as numbers, and empties', async () => {
    expect(await names(`filter=${col.City}:eq:LONDON`)).toEqual(['Ada', 'Dee']);
    expect(await names(`filter=${col.City}:neq:london`)).toEqual(['bob', 'Cy', 'Eve', 'Fay']);
    expect(await names(`filter=${col.City}:contains:LI`)).toEqual(['bob', 'Cy']);
    expect(await names(`filter=${col.City}:not_contains:on`)).toEqual(['bob', 'Eve', 'Fay']);
    expect(await names(`filter=${col.Name}:starts_with:B`)).toEqual(['bob']);
    expect(await names(`filter=${col.City}:ends_with:IS`)).toEqual(['Fay']);
    expect(await names(`filter=${col.Score}:gt:50`)).toEqual(['Ada', 'Fay']);
    expect(await names(`filter=${col.Score}:gte:50`)).toEqual(['Ada', 'Eve', 'Fay']);
    expect(await names(`filter=${col.Score}:lt:50`)).toEqual(['bob']);
    expect(await names(`filter=${col.Score}:lte:7`)).toEqual(['bob']);
    expect(await names(`filter=${col.Score}:eq:7.0`)).toEqual(['bob']);
    expect(await names(`filter=${col.Score}:is_empty`)).toEqual(['Dee']);
    expect(await names(`filter=${col.City}:is_not_empty`)).toEqual(['Ada', 'bob', 'Cy', 'Dee', 'Fay']);
    expect(await names(`filter=${col.Name}:gt:C`)).toEqual(['Cy', 'Dee', 'Eve', 'Fay']);
    expect(await names(`filter=${col.Name}:lte:bob`)).toEqual(['Ada', 'bob']);
    expect(await names(`filter=${col.City}:contains:${encodeURIComponent('a:b')}`)).toEqual([]);
  });

  it('combines filters with all or any, and filters a formula column like any other', async () => {
    expect(await names(`filter=${col.City}:contains:on&filter=${col.Score}:gt:50`)).toEqual(['Ada']);
    expect(await names(`filter=${col.City}:eq:paris&filter=${col.Score}:lt:10&filter_mode=any`)).toEqual([
      'bob',
      'Fay',
    ]);
    expect(await names(`filter=${col.Grade}:eq:pass`)).toEqual(['Ada', 'Eve', 'Fay']);
    // A formula cell in error ("n/a" is no number) is empty to a filter; no score is simply not >= 50.
    expect(await names(`filter=${col.Grade}:is_empty`)).toEqual(['Cy']);
    expect(await names(`filter=${col.Grade}:eq:fail`)).toEqual(['bob', 'Dee']);
  });

  it('sorts numbers in order before text, empties last both ways, on any column', async () => {
    expect(await names(`sort=${col.Score}`)).toEqual(['bob', 'Eve', 'Ada', 'Fay', 'Cy', 'Dee']);
    expect(await names(`sort=${col.Score}:desc`)).toEqual(['Fay', 'Ada', 'Eve', 'bob', 'Cy', 'Dee']);
    expect(await names(`sort=${col.Name}:desc`)).toEqual(['Fay', 'Eve', 'Dee', 'Cy', 'bob', 'Ada']);
    expect(await names(`sort=${col.City}&sort=${col.Name}:desc`)).toEqual(['bob', 'Cy', 'Dee', 'Ada', 'Fay', 'Eve']);
    expect(await names(`sort=${col.Grade}:desc&sort=${col.Name}`)).toEqual(['Ada', 'Eve', 'Fay', 'bob', 'Dee', 'Cy']);
  });

  it('refuses malformed filters and sorts (422), more than 5 or longer than 250 in the query, and ones on columns the table does not have (409)', async () => {
    const status = async (query: string) => (await api.get(`/tables/${tableId}/rows/?${query}`)).statusCode;
    expect(await status(`filter=${col.City}:like:x`)).toBe(422);
    expect(await status('filter=nonsense')).toBe(422);
    expect(await status(`sort=${col.City}:up`)).toBe(422);
    expect(await status(`filter=${unknownId}:eq:x`)).toBe(409);
    expect(await status(`sort=${unknownId}`)).toBe(409);
    expect(await status(Array.from({ length: 5 }, () => `filter=${col.City}:is_not_empty`).join('&'))).toBe(200);
    expect(await status(Array.from({ length: 6 }, () => `filter=${col.City}:is_not_empty`).join('&'))).toBe(422);
    const value = 'v'.repeat(250 - `${col.City}:eq:`.length);
    expect(await status(`filter=${col.City}:eq:${value}`)).toBe(200);
    expect(await status(`filter=${col.City}:eq:${value}v`)).toBe(422);
    expect(await status(Array.from({ length: 5 }, () => `sort=${col.City}`).join('&'))).toBe(200);
    expect(await status(Array.from({ length: 6 }, () => `sort=${col.City}`).join('&'))).toBe(422);
  });
});

describe('saved views', () => {
  it('saves filters, sorts, hidden and ordered columns, and the grid applies them', async () => {
    const { table, ids } = await tableWithColumns('Name', 'Score', 'City');
    await api.post(`/tables/${table.id}/rows/bulk/`, {
      rows: [
        ['Ada', 90, 'London'],
        ['Bob', 20, 'London'],
        ['Cy', 70, 'Paris'],
      ].map(([n, s, c]) => ({ cells: { [ids.Name!]: n, [ids.Score!]: s, [ids.City!]: c } })),
    });
    const res = await api.post(`/tables/${table.id}/views/`, {
      name: 'London by score',
      filters: [{ column_id: ids.City, op: 'eq', value: 'london' }],
      sorts: [{ column_id: ids.Score, direction: 'asc' }],
      hidden_column_ids: [ids.City],
      column_order: [ids.Score],
    });
    expect(res.statusCode).toBe(201);
    const view = res.json();
    expect(view).toMatchObject({
      table_id: table.id,
      name: 'London by score',
      filter_mode: 'all',
      hidden_column_ids: [ids.City],
      column_order: [ids.Score],
    });

    const grid = (await api.get(`/tables/${table.id}/rows/?view_id=${view.id}`)).json();
    expect(grid.rows.map((r: { cells: Record<string, unknown> }) => r.cells[ids.Name!])).toEqual(['Bob', 'Ada']);
    expect(grid.column_ids).toEqual([ids.Score, ids.Name]);
    // Filters and sorts given with the request replace the view's; its columns stay.
    const replaced = (
      await api.get(`/tables/${table.id}/rows/?view_id=${view.id}&sort=${ids.Name}:desc&filter=${ids.Score}:gt:0`)
    ).json();
    expect(replaced.rows.map((r: { cells: Record<string, unknown> }) => r.cells[ids.Name!])).toEqual([
      'Cy',
      'Bob',
      'Ada',
    ]);
    expect(replaced.column_ids).toEqual([ids.Score, ids.Name]);

    expect((await api.get(`/tables/${table.id}/views/`)).json().views.map((v: { id: string }) => v.id)).toEqual([
      view.id,
    ]);
    const updated = (
      await api.patch(`/tables/${table.id}/views/${view.id}/`, { name: 'Everyone', filters: [], hidden_column_ids: [] })
    ).json();
    expect(updated).toMatchObject({
      name: 'Everyone',
      filters: [],
      sorts: [{ column_id: ids.Score }],
      hidden_column_ids: [],
    });

    // Deleting a column takes it out of the views.
    await api.del(`/tables/${table.id}/columns/${ids.Score}/`);
    expect((await api.get(`/tables/${table.id}/views/${view.id}/`)).json()).toMatchObject({
      sorts: [],
      column_order: [],
    });

    expect((await api.del(`/tables/${table.id}/views/${view.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/tables/${table.id}/views/${view.id}/`)).statusCode).toBe(404);
    expect((await api.get(`/tables/${table.id}/rows/?view_id=${view.id}`)).statusCode).toBe(404);
  });

  it('bounds views: a unique name of 1 to 255, at most 20 filters and 5 sorts, only the table’s columns', async () => {
    const { table, ids } = await tableWithColumns('Name');
    const other = await tableWithColumns('Name');
    const create = (body: object) => api.post(`/tables/${table.id}/views/`, { name: 'V', ...body });
    const filter = { column_id: ids.Name, op: 'is_not_empty' };
    const sort = { column_id: ids.Name };
    expect(
      (await create({ name: 'n'.repeat(255), filters: Array(20).fill(filter), sorts: Array(5).fill(sort) })).statusCode,
    ).toBe(201);
    expect((await create({ name: 'n'.repeat(256) })).statusCode).toBe(422);
    expect((await create({ filters: Array(21).fill(filter) })).statusCode).toBe(422);
    expect((await create({ sorts: Array(6).fill(sort) })).statusCode).toBe(422);
    expect((await create({ filters: [{ column_id: ids.Name, op: 'like' }] })).statusCode).toBe(422);
    expect((await create({ hidden_column_ids: [other.ids.Name] })).statusCode).toBe(409);
    expect((await create({ name: 'Mine' })).statusCode).toBe(201);
    expect((await create({ name: 'MINE' })).statusCode).toBe(409);
    const view = (await api.post(`/tables/${other.table.id}/views/`, { name: 'Theirs' })).json();
    expect((await api.get(`/tables/${table.id}/views/${view.id}/`)).statusCode).toBe(404);
    expect((await api.get(`/tables/${table.id}/rows/?view_id=${view.id}`)).statusCode).toBe(404);
  });
});
