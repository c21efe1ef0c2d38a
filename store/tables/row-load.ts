/**
 * A bulk load of rows into a table (the CSV import): rows stream into table_rows itself with
 * `COPY … FROM STDIN` as they are read, in the caller's transaction, so a load that fails or is
 * aborted writes nothing. Each row's cells travel as their JSON text (only non-empty values, as
 * every row write stores them) under an id made here, so no staging table or second pass is
 * needed: rows get their `seq` in the order they are sent.
 *
 * The rows go in COPY statements of at most `statementRows` rows (a multiple of a thousand), so
 * the change feed's statement triggers log them as they log any insert: one `rows_added` entry
 * per thousand rows, in order. When the table has formula columns a statement is at most
 * `formulaRows` rows, held here until it ends, and their formula cells are written after it.
 */
import { randomUUID } from 'node:crypto';
import { copyIn, type CopyIn } from '../../db/copy-in.js';
import type { Db } from '../../db/sql.js';
import type { Cells } from '../../domain/tables/tables.js';
import { writeFormulaCells } from './cells.js';
import type { TableColumns } from './columns.js';

/** Characters of COPY text sent at a time. */
const chunkChars = 1 << 16;
/** Rows one COPY statement carries at most: bounds what Postgres keeps for the statement's triggers. */
const statementRows = 50_000;
/** Rows a statement carries when the table has formula columns: held in memory to compute their cells. */
const formulaRows = 5_000;

/** A JSON text as a field of COPY's text format: JSON has no raw tab or line break, only backslashes to double. */
const copyJson = (json: string) => (json.includes('\\') ? json.replace(/\\/g, '\\\\') : json);

export interface RowLoad {
  /** Queues a row: one value per column of the load, in its order; '' is an empty cell. */
  add(values: string[]): Promise<void>;
  /** Lands every queued row with its formula cells and counts them on the table; answers how many. */
  finish(): Promise<number>;
  /** Ends the load; the transaction must then roll back. */
  abort(error: Error): void;
}

/**
 * Starts loading rows whose values go to `columnIds` (input columns of the table, each once).
 * NUL characters must have been refused before: Postgres text cannot hold them.
 */
export function startRowLoad(
  tx: Db,
  workspaceId: string,
  tableId: string,
  columns: TableColumns,
  columnIds: string[],
): RowLoad {
  const withFormulas = columns.plan.order.length > 0;
  const perStatement = withFormulas ? formulaRows : statementRows;
  /** Each column's key as JSON text, with the `"…":` that precedes its value. */
  const keys = columnIds.map((id) => `${JSON.stringify(id)}:`);
  const prefix = `\t${workspaceId}\t${tableId}\t`;

  let copy: CopyIn | undefined;
  let chunk = '';
  let inStatement = 0;
  let count = 0;
  /** The statement's rows, kept only when their formula cells are to be computed. */
  let held: { id: string; cells: Cells }[] = [];

  // A COPY aborted or refused throws from the next add or finish (db/copy-in.ts).
  const open = async () => {
    copy = await copyIn(tx`copy table_rows (id, workspace_id, table_id, cells) from stdin`);
  };
  const close = async () => {
    if (!copy) return;
    const ending = copy;
    copy = undefined;
    await ending.end(chunk);
    chunk = '';
    inStatement = 0;
    if (held.length > 0) await writeFormulaCells(tx, columns, held);
    held = [];
  };

  return {
    async add(values) {
      if (!copy) await open();
      const id = randomUUID();
      let json = '{';
      let cells: Cells | undefined = withFormulas ? {} : undefined;
      for (let i = 0; i < values.length; i += 1) {
        const value = values[i]!;
        if (value === '') continue;
        json += `${json.length > 1 ? ',' : ''}${keys[i]}${JSON.stringify(value)}`;
        if (cells) cells[columnIds[i]!] = value;
      }
      chunk += `${id}${prefix}${copyJson(json)}}\n`;
      if (cells) held.push({ id, cells });
      cells = undefined;
      count += 1;
      inStatement += 1;
      if (inStatement >= perStatement) await close();
      else if (chunk.length >= chunkChars) {
        const text = chunk;
        chunk = '';
        await copy!.write(text);
      }
    },

    async finish() {
      await close();
      if (count > 0)
        await tx`update tables set row_count = row_count + ${count}, updated_at = now() where id = ${tableId}`;
      return count;
    },

    abort(error) {
      copy?.destroy(error);
    },
  };
}
