/**
 * Computed cells in Postgres: a formula column computed over more rows than one batch of the
 * pipelined pass, and the references of a cell to its row and its column (migration 020 checks
 * them per statement instead of by foreign keys) kept as a foreign key would keep them.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { recomputeFormulas } from '../../store/tables/cells.js';
import { createColumn, deleteColumn, loadColumns, updateColumn } from '../../store/tables/columns.js';
import { createTable } from '../../store/tables/tables.js';
import { createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { useTestDatabase } from '../support/database.js';

const db = useTestDatabase();
let workspaceId: string;

beforeAll(async () => {
  workspaceId = (await createWorkspaceWithAdmin(db.sql, { name: 'Cells', plan: 'paid' })).workspace_id;
});

/** A table of `rows` rows with input columns Name and Count. */
async function tableOf(rows: number) {
  const table = await createTable(db.sql, { workspaceId, memberId: null }, { name: 'Cells' });
  const name = (await createColumn(db.sql, workspaceId, table.id, { kind: 'input', name: 'Name' })).id;
  const count = (await createColumn(db.sql, workspaceId, table.id, { kind: 'input', name: 'Count' })).id;
  await db.sql`
    insert into table_rows (workspace_id, table_id, cells)
    select ${workspaceId}, ${table.id}, jsonb_build_object(${name}::text, 'row ' || i, ${count}::text, case when i % 1000 = 0 then 'many' else i::text end)
    from generate_series(1, ${rows}) i`;
  return { tableId: table.id, name, count };
}

/** A formula column `name` computing `formula` on the table. */
const formulaColumn = (tableId: string, name: string, formula: string) =>
  createColumn(db.sql, workspaceId, tableId, { kind: 'formula', name, formula });

/** A table of one row with an Upper formula column: the column and the row. */
async function oneRowWithUpper() {
  const { tableId } = await tableOf(1);
  const formula = await formulaColumn(tableId, 'Upper', 'upper({Name})');
  const [row] = await db.sql<{ id: string }[]>`select id from table_rows where table_id = ${tableId}`;
  return { formula, row: row! };
}

const cellsOf = (columnId: string) =>
  db.sql<{ state: string; value: unknown; error: string | null; n: number }[]>`
    select c.state, c.value, c.error, r.seq::int as n from table_cells c join table_rows r on r.id = c.row_id
    where c.column_id = ${columnId} order by r.seq`;

describe('a formula column over many rows', () => {
  it('computes every row across batches, errors as cell errors, and again when the formula changes', async () => {
    const { tableId } = await tableOf(12_345);
    const double = await formulaColumn(tableId, 'Double', '{Count} * 2');
    const label = await formulaColumn(tableId, 'Label', 'concat({Name}, ": ", {Double})');
    const doubles = await cellsOf(double.id);
    expect(doubles).toHaveLength(12_345);
    expect(doubles[0]).toEqual({ state: 'done', value: 2, error: null, n: 1 });
    expect(doubles[12_344]).toMatchObject({ state: 'done', value: 24_690 });
    // Every thousandth row's count is text: a cell error there, and in the formula reading it.
    expect(doubles.filter((c) => c.state === 'error')).toHaveLength(12);
    const labels = await cellsOf(label.id);
    expect(labels[6_000]).toMatchObject({ state: 'done', value: 'row 6001: 12002' });
    expect(labels[999]).toMatchObject({ state: 'error', error: '{Double} has an error.' });

    await updateColumn(db.sql, workspaceId, tableId, double.id, { formula: '{Count} * 3' });
    expect((await cellsOf(double.id))[12_344]).toMatchObject({ state: 'done', value: 37_035 });
    expect((await cellsOf(label.id))[6_000]).toMatchObject({ state: 'done', value: 'row 6001: 18003' });
  });
});

describe('a new formula column and a changed one', () => {
  it('store the same cells: COPY for a new column, an upsert for a changed one', async () => {
    // Two batches of the pass; texts COPY must escape, and errors, among the rows.
    const { tableId, name } = await tableOf(25_000);
    const odd = 'a\\b \\N\ttab\nline\r"quoted" ß 😀 ';
    await db.sql`
      update table_rows set cells = jsonb_set(cells, array[${name}::text], to_jsonb(${odd} || seq))
      where table_id = ${tableId} and seq % 7 = 0`;
    const formula = 'concat(upper({Name}), " / ", {Count} * 2)';
    const added = await formulaColumn(tableId, 'Label', formula);
    const copied = await cellsOf(added.id);
    expect(copied).toHaveLength(25_000);
    expect(copied.find((c) => c.n % 7 === 0 && c.state === 'done')?.value).toMatch(
      /^A\\B \\N\tTAB\nLINE\r"QUOTED" SS 😀 \d+ \/ \d+$/,
    );
    expect(copied.filter((c) => c.state === 'error').length).toBeGreaterThan(0);

    await updateColumn(db.sql, workspaceId, tableId, added.id, { formula: '{Count}' });
    await updateColumn(db.sql, workspaceId, tableId, added.id, { formula });
    expect(await cellsOf(added.id)).toEqual(copied);
  });

  it("locks the rows it computes until it commits, as the cells' references would", async () => {
    const { tableId, name } = await tableOf(3);
    const [row] = await db.sql<
      { id: string }[]
    >`select id from table_rows where table_id = ${tableId} order by seq limit 1`;
    let deleted: Promise<unknown> | undefined;
    await db.sql.begin(async (tx) => {
      await tx`
        insert into table_columns (workspace_id, table_id, name, kind, position, config)
        values (${workspaceId}, ${tableId}, 'Upper', 'formula', 2, ${tx.json({ formula: `upper({${name}})` })})`;
      const columns = await loadColumns(tx, tableId);
      const upper = columns.list.find((c) => c.name === 'Upper')!.id;
      await recomputeFormulas(tx, tableId, columns, { columnIds: new Set([upper]), fresh: true });
      // The delete waits for the pass's lock on the row, then its cascade sees the cell.
      deleted = db.sql`delete from table_rows where id = ${row!.id}`.execute();
      await new Promise((resolve) => setTimeout(resolve, 200));
    });
    await deleted;
    expect((await db.sql`select count(*)::int as n from table_cells where row_id = ${row!.id}`)[0]!.n).toBe(0);
  });
  it('raises the error of a COPY Postgres refuses at its end, and writes nothing', async () => {
    const { tableId, name } = await tableOf(3);
    const failed = db.sql.begin(async (tx) => {
      await tx`
        insert into table_columns (workspace_id, table_id, name, kind, position, config)
        values (${workspaceId}, ${tableId}, 'Upper', 'formula', 2, ${tx.json({ formula: `upper({${name}})` })})`;
      const columns = await loadColumns(tx, tableId);
      const upper = columns.list.find((c) => c.name === 'Upper')!.id;
      // Gone before its cells are written: the reference trigger refuses them when the COPY ends.
      await tx`delete from table_columns where id = ${upper}`;
      await recomputeFormulas(tx, tableId, columns, { columnIds: new Set([upper]), fresh: true });
    });
    await expect(failed).rejects.toMatchObject({ code: '23503' });
    expect((await db.sql`select count(*)::int as n from table_columns where table_id = ${tableId}`)[0]!.n).toBe(2);
  });
});

describe("a cell's row and column", () => {
  it('take their cells with them when deleted, the table included', async () => {
    const { tableId } = await tableOf(10);
    const formula = await formulaColumn(tableId, 'Upper', 'upper({Name})');
    await db.sql`delete from table_rows where table_id = ${tableId} and seq = (select min(seq) from table_rows where table_id = ${tableId})`;
    expect(await cellsOf(formula.id)).toHaveLength(9);
    await deleteColumn(db.sql, workspaceId, tableId, formula.id);
    expect((await db.sql`select count(*)::int as n from table_cells where column_id = ${formula.id}`)[0]!.n).toBe(0);
    const other = await formulaColumn(tableId, 'Lower', 'lower({Name})');
    await db.sql`delete from tables where id = ${tableId}`;
    expect((await db.sql`select count(*)::int as n from table_cells where column_id = ${other.id}`)[0]!.n).toBe(0);
  });

  it('must exist: a cell of a missing row or column is refused as by a foreign key', async () => {
    const { formula, row } = await oneRowWithUpper();
    await expect(
      db.sql`insert into table_cells (column_id, row_id, state) values (${formula.id}, gen_random_uuid(), 'done')`,
    ).rejects.toMatchObject({
      code: '23503',
    });
    await expect(
      db.sql`insert into table_cells (column_id, row_id, state) values (gen_random_uuid(), ${row.id}, 'done')`,
    ).rejects.toMatchObject({
      code: '23503',
    });
    await expect(
      db.sql`update table_cells set row_id = gen_random_uuid() where column_id = ${formula.id}`,
    ).rejects.toMatchObject({ code: '23503' });
    await expect(db.sql`update table_rows set id = gen_random_uuid() where id = ${row.id}`).rejects.toMatchObject({
      code: '23503',
    });
  });

  it('cannot be deleted while another transaction is writing its cell, nor the cell written once it is gone', async () => {
    const { formula, row } = await oneRowWithUpper();
    await db.sql`delete from table_cells where row_id = ${row.id}`;
    let deleted: Promise<unknown> | undefined;
    await db.sql.begin(async (tx) => {
      await tx`insert into table_cells (column_id, row_id, state) values (${formula.id}, ${row.id}, 'done')`;
      // The delete waits for this transaction's lock on the row, then its cascade sees the cell.
      deleted = db.sql`delete from table_rows where id = ${row.id}`.execute();
      await new Promise((resolve) => setTimeout(resolve, 200));
    });
    await deleted;
    expect((await db.sql`select count(*)::int as n from table_cells where row_id = ${row.id}`)[0]!.n).toBe(0);
    await expect(
      db.sql`insert into table_cells (column_id, row_id, state) values (${formula.id}, ${row.id}, 'done')`,
    ).rejects.toMatchObject({ code: '23503' });
  });
});
