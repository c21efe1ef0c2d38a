import { beforeAll, describe, expect, it } from 'vitest';
import { columnsPerTable } from '../../domain/tables/tables.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

const columnNames = async (tableId: string) =>
  (await api.get(`/tables/${tableId}/columns/`))
    .json()
    .columns.map((c: { name: string; position: number }) => `${c.position}:${c.name}`);

/** A table with the given input columns and one row of values; answers the ids by column name. */
async function tableWith(inputs: string[], values: Record<string, unknown> = {}) {
  const table = await api.table({ name: 'Formulas' });
  const ids: Record<string, string> = {};
  for (const name of inputs) ids[name] = (await api.column(table.id, { kind: 'input', name })).id;
  const cells = Object.fromEntries(Object.entries(values).map(([name, value]) => [ids[name]!, value]));
  const row = (await api.post(`/tables/${table.id}/rows/`, { cells })).json();
  return { table, ids, row };
}

/** The cell a formula gives on a row with these values. */
async function evaluate(formula: string, values: Record<string, unknown>) {
  const { table, row } = await tableWith(Object.keys(values), values);
  const column = await api.column(table.id, { kind: 'formula', name: 'Result', formula });
  const read = (await api.get(`/tables/${table.id}/rows/${row.id}/`)).json();
  return {
    column,
    cell: read.computed[column.id] as { state: string; value: unknown; error: string | null; cost: number },
  };
}

describe('columns', () => {
  it('adds input columns in order, at a position, and past the end appends', async () => {
    const table = await api.table({ name: 'Columns' });
    const email = await api.column(table.id, { kind: 'input', name: 'Email' });
    expect(email).toMatchObject({
      table_id: table.id,
      name: 'Email',
      kind: 'input',
      position: 0,
      parent_column_id: null,
      formula: null,
      formula_error: null,
    });
    await api.column(table.id, { kind: 'input', name: 'Name', position: 0 });
    await api.column(table.id, { kind: 'input', name: 'Company', position: 1_000_000 });
    await api.column(table.id, { kind: 'input', name: 'Title', position: 1 });
    expect(await columnNames(table.id)).toEqual(['0:Name', '1:Title', '2:Email', '3:Company']);
    expect(
      (await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'X', position: 1_000_001 })).statusCode,
    ).toBe(422);
    expect(
      (await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'X', position: -1 })).statusCode,
    ).toBe(422);
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'enrichment', name: 'X' })).statusCode).toBe(422);
  });

  it('bounds names at 1 to 255 characters, unique in the table whatever their case', async () => {
    const table = await api.table({ name: 'Names' });
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'n'.repeat(255) })).statusCode).toBe(
      201,
    );
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'n'.repeat(256) })).statusCode).toBe(
      422,
    );
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: '' })).statusCode).toBe(422);
    await api.column(table.id, { kind: 'input', name: 'Email' });
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'EMAIL' })).statusCode).toBe(409);
    const other = await api.table({ name: 'Other' });
    expect((await api.post(`/tables/${other.id}/columns/`, { kind: 'input', name: 'Email' })).statusCode).toBe(201);
  });

  it(`holds at most ${columnsPerTable} columns`, async () => {
    const table = await api.table({ name: 'Wide' });
    await stack.sql`
      insert into table_columns (workspace_id, table_id, name, kind, position)
      select ${paid.workspaceId}, ${table.id}, 'c' || n, 'input', n - 1 from generate_series(1, ${columnsPerTable - 1}) n`;
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'Last one' })).json().position).toBe(
      columnsPerTable - 1,
    );
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'One too many' })).statusCode).toBe(
      409,
    );
  });

  it('renames and moves a column; deleting one closes the gap and takes its values out of the rows', async () => {
    const { table, ids, row } = await tableWith(['A', 'B', 'C'], { A: 'a', B: 'b', C: 'c' });
    expect(
      (await api.patch(`/tables/${table.id}/columns/${ids.C}/`, { name: 'Cee', position: 0 })).json(),
    ).toMatchObject({ name: 'Cee', position: 0 });
    expect(await columnNames(table.id)).toEqual(['0:Cee', '1:A', '2:B']);
    expect((await api.patch(`/tables/${table.id}/columns/${ids.A}/`, { name: 'b' })).statusCode).toBe(409);
    expect((await api.patch(`/tables/${table.id}/columns/${ids.A}/`, { formula: '1' })).statusCode).toBe(409);

    expect((await api.del(`/tables/${table.id}/columns/${ids.A}/`)).statusCode).toBe(204);
    expect(await columnNames(table.id)).toEqual(['0:Cee', '1:B']);
    expect((await api.get(`/tables/${table.id}/columns/${ids.A}/`)).statusCode).toBe(404);
    const [stored] = await stack.sql<
      { cells: Record<string, unknown> }[]
    >`select cells from table_rows where id = ${row.id}`;
    expect(Object.keys(stored!.cells).sort()).toEqual([ids.B, ids.C].sort());
  });
});

describe('formula columns', () => {
  it('computes every row when added and each new or changed row after, by column name', async () => {
    const { table, ids, row } = await tableWith(['Price', 'Qty'], { Price: '2.5', Qty: 4 });
    const total = await api.column(table.id, { kind: 'formula', name: 'Total', formula: '{Price} * {qty}' });
    expect(total).toMatchObject({ kind: 'formula', formula: '{Price} * {Qty}', formula_error: null });
    expect((await api.get(`/tables/${table.id}/rows/${row.id}/`)).json().computed[total.id]).toEqual({
      state: 'done',
      value: 10,
      error: null,
      cost: 0,
    });

    const added = (await api.post(`/tables/${table.id}/rows/`, { cells: { [ids.Price!]: 3, [ids.Qty!]: 3 } })).json();
    expect(added.computed[total.id].value).toBe(9);
    const changed = (await api.patch(`/tables/${table.id}/rows/${added.id}/`, { cells: { [ids.Qty!]: 10 } })).json();
    expect(changed.computed[total.id].value).toBe(30);

    // A formula may read another formula; changing the first computes the second again.
    const taxed = await api.column(table.id, { kind: 'formula', name: 'With tax', formula: 'round({Total} * 1.2, 2)' });
    await api.patch(`/tables/${table.id}/columns/${total.id}/`, { formula: '{Price} + {Qty}' });
    expect((await api.get(`/tables/${table.id}/rows/${row.id}/`)).json().computed).toMatchObject({
      [total.id]: { value: 6.5 },
      [taxed.id]: { value: 7.8 },
    });
  });

  it('keeps a formula through a rename of the columns it reads, and refuses to delete one it reads', async () => {
    const { table, ids } = await tableWith(['First', 'Last'], { First: 'Ada', Last: 'Lovelace' });
    const full = await api.column(table.id, { kind: 'formula', name: 'Full', formula: 'concat({First}, " ", {Last})' });
    await api.patch(`/tables/${table.id}/columns/${ids.First}/`, { name: 'Given name' });
    expect((await api.get(`/tables/${table.id}/columns/${full.id}/`)).json().formula).toBe(
      'concat({Given name}, " ", {Last})',
    );
    const del = await api.del(`/tables/${table.id}/columns/${ids.Last}/`);
    expect(del.statusCode).toBe(409);
    expect(del.json().detail).toContain('Full');
    await api.del(`/tables/${table.id}/columns/${full.id}/`);
    expect((await api.del(`/tables/${table.id}/columns/${ids.Last}/`)).statusCode).toBe(204);
  });

  it('evaluates text, numbers, comparisons and conditions the way a spreadsheet person expects', async () => {
    const cases: [string, Record<string, unknown>, unknown][] = [
      ['{Name} == "Ada"', { Name: 'Ada' }, true],
      ['{Name} != "Ada"', { Name: 'Bob' }, true],
      ['{N} == 5', { N: '5' }, true],
      ['{N} * 2 + 1', { N: '20' }, 41],
      ['{N} > 3 ? "big" : "small"', { N: 2 }, 'small'],
      ['{N} > 3', { N: null }, false],
      ['upper(left({Name}, 2))', { Name: 'ada' }, 'AD'],
      ['len(trim({Name}))', { Name: '  ada  ' }, 3],
      ['contains({Email}, "@ACME.com")', { Email: 'ada@acme.com' }, true],
      ['coalesce({Nick}, {Name})', { Nick: null, Name: 'Ada' }, 'Ada'],
      ['isEmpty({Nick}) and not false', { Nick: null }, true],
      ['replace({Domain}, "www.", "")', { Domain: 'www.acme.com' }, 'acme.com'],
      ['concat({A}, "-", {B})', { A: 1, B: true }, '1-true'],
      ['max({A}, {B}, 3) - min(1, 2)', { A: 7, B: 2 }, 6],
      ['"{not a column}"', { A: 1 }, '{not a column}'],
    ];
    for (const [formula, values, expected] of cases) {
      const { cell } = await evaluate(formula, values);
      expect({ formula, cell }).toEqual({ formula, cell: { state: 'done', value: expected, error: null, cost: 0 } });
    }
  });

  it('makes a failing row a cell error, never a refusal or a 500', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['{N} + 1', { N: null }, /.+/],
      ['{N} * 2', { N: 'abc' }, /abc/],
      ['1 / {N}', { N: 0 }, /not a finite number/],
      ['sqrt({N})', { N: -4 }, /not a number, text or true\/false/],
      ['concat({T}, {T})', { T: 'x'.repeat(6000) }, /longer than 10000/],
    ];
    for (const [formula, values, error] of cases) {
      const { column, cell } = await evaluate(formula, values);
      expect(column.formula_error).toBeNull();
      expect({ formula, state: cell.state, value: cell.value }).toEqual({ formula, state: 'error', value: null });
      expect(cell.error).toMatch(error);
    }
  });

  it('accepts a formula it cannot use, says why on the column, and makes every cell that error', async () => {
    const cases: [string, RegExp][] = [
      ['{Price} *', /cannot be read/],
      ['{Nope} + 1', /No column named "Nope"/],
      ['1:100000000', /range/],
      ['[1, 2, 3]', /array/],
      ['f(x) = x', /functionassignment/],
      ['{Price} = 3', /assignment/],
      ['import("x")', /"import" is not available/],
      ['evaluate("1+1")', /"evaluate" is not available/],
      ['x + 1', /Unknown name "x"/],
      ['{Price', /never closed/],
      ['   ', /empty/],
    ];
    for (const [formula, error] of cases) {
      const { column, cell } = await evaluate(formula, { Price: 3 });
      expect({ formula, error: column.formula_error }).toEqual({ formula, error: expect.stringMatching(error) });
      expect(cell).toMatchObject({ state: 'error', error: column.formula_error });
    }
  });

  it('finds a loop between formulas and errors its cells, then computes again once it is broken', async () => {
    const { table, row } = await tableWith(['N'], { N: 1 });
    const a = await api.column(table.id, { kind: 'formula', name: 'A', formula: '{N} + 1' });
    const b = await api.column(table.id, { kind: 'formula', name: 'B', formula: '{A} * 10' });
    const looped = (await api.patch(`/tables/${table.id}/columns/${a.id}/`, { formula: '{B} + 1' })).json();
    expect(looped.formula_error).toMatch(/Circular reference/);
    expect((await api.get(`/tables/${table.id}/columns/${b.id}/`)).json().formula_error).toMatch(/Circular reference/);
    expect((await api.get(`/tables/${table.id}/rows/${row.id}/`)).json().computed[b.id].state).toBe('error');
    await api.patch(`/tables/${table.id}/columns/${a.id}/`, { formula: '{N} + 2' });
    expect((await api.get(`/tables/${table.id}/rows/${row.id}/`)).json().computed).toMatchObject({
      [a.id]: { value: 3 },
      [b.id]: { value: 30 },
    });
  });

  it('bounds a formula at 2000 characters and refuses writes into its cells', async () => {
    const { table, row } = await tableWith(['N'], { N: 1 });
    const ok = await api.post(`/tables/${table.id}/columns/`, {
      kind: 'formula',
      name: 'Long',
      formula: `1${' '.repeat(1998)}1`.slice(0, 1999) + '1',
    });
    expect(ok.statusCode).toBe(201);
    expect(
      (await api.post(`/tables/${table.id}/columns/`, { kind: 'formula', name: 'Longer', formula: '1'.repeat(2001) }))
        .statusCode,
    ).toBe(422);
    expect(
      (await api.post(`/tables/${table.id}/columns/`, { kind: 'formula', name: 'Empty', formula: '' })).statusCode,
    ).toBe(422);
    expect((await api.post(`/tables/${table.id}/columns/`, { kind: 'formula', name: 'None' })).statusCode).toBe(422);
    const write = await api.patch(`/tables/${table.id}/rows/${row.id}/`, { cells: { [ok.json().id]: 'mine' } });
    expect(write.statusCode).toBe(409);
    expect(write.json().detail).toMatch(/computed/);
  });
});

describe('column templates', () => {
  it('saves a column for reuse; on another table its formula reads that table’s columns of the same names', async () => {
    const { table } = await tableWith(['Price', 'Qty'], { Price: 2, Qty: 3 });
    const total = await api.column(table.id, { kind: 'formula', name: 'Total', formula: '{Price} * {Qty}' });
    const saved = await api.post(`/tables/${table.id}/columns/${total.id}/template/`, { name: 'Line total' });
    expect(saved.statusCode).toBe(201);
    const template = saved.json();
    expect(template).toMatchObject({
      name: 'Line total',
      kind: 'formula',
      column_name: 'Total',
      formula: '{Price} * {Qty}',
    });
    expect(
      (await api.post(`/tables/${table.id}/columns/${total.id}/template/`, { name: 'LINE TOTAL' })).statusCode,
    ).toBe(409);

    const other = await tableWith(['Qty', 'Price'], { Price: 5, Qty: 5 });
    const made = await api.post(`/tables/${other.table.id}/columns/from-template/`, { template_id: template.id });
    expect(made.statusCode).toBe(201);
    expect(made.json()).toMatchObject({ name: 'Total', kind: 'formula', formula_error: null });
    expect(
      (await api.get(`/tables/${other.table.id}/rows/${other.row.id}/`)).json().computed[made.json().id].value,
    ).toBe(25);
    expect(
      (await api.post(`/tables/${other.table.id}/columns/from-template/`, { template_id: template.id })).statusCode,
    ).toBe(409);

    // A table without those columns gets the column with its formula's error.
    const bare = await api.table({ name: 'Bare' });
    const orphan = (
      await api.post(`/tables/${bare.id}/columns/from-template/`, { template_id: template.id, name: 'T', position: 0 })
    ).json();
    expect(orphan.formula_error).toMatch(/No column named "Price"/);

    const input = await api.column(bare.id, { kind: 'input', name: 'Email' });
    const inputTemplate = (
      await api.post(`/tables/${bare.id}/columns/${input.id}/template/`, { name: 'Email column' })
    ).json();
    expect(inputTemplate).toMatchObject({ kind: 'input', formula: null, column_name: 'Email' });
  });

  it('lists, renames and deletes templates; columns made from one stay', async () => {
    const { table, ids } = await tableWith(['Website']);
    const template = (await api.post(`/tables/${table.id}/columns/${ids.Website}/template/`, { name: 'Site' })).json();
    expect((await api.get('/column-templates/')).json().templates.map((t: { id: string }) => t.id)).toContain(
      template.id,
    );
    const renamed = await api.patch(`/column-templates/${template.id}/`, { name: 'Web site', column_name: 'Domain' });
    expect(renamed.json()).toMatchObject({ name: 'Web site', column_name: 'Domain' });
    expect((await api.patch(`/column-templates/${template.id}/`, { name: 'n'.repeat(256) })).statusCode).toBe(422);
    const other = await api.table({ name: 'Uses it' });
    const column = (await api.post(`/tables/${other.id}/columns/from-template/`, { template_id: template.id })).json();
    expect(column.name).toBe('Domain');
    expect((await api.del(`/column-templates/${template.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/column-templates/${template.id}/`)).statusCode).toBe(404);
    expect((await api.get(`/tables/${other.id}/columns/${column.id}/`)).statusCode).toBe(200);
    expect(
      (await api.post(`/tables/${other.id}/columns/from-template/`, { template_id: template.id })).statusCode,
    ).toBe(404);
  });
});
