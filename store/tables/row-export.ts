/**
 * The grid as CSV in one `COPY (select …) TO STDOUT (format csv)`: each shown column rendered in
 * SQL exactly as the grid shows it (domain/tables/tables.ts displayValue / displayComputed), with
 * the grid's own filters and sorts (gridWhere, gridOrder). Postgres writes the CSV; the API only
 * passes its bytes on.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { Db, Sql } from '../../db/sql.js';
import { isComputed, type ColumnRecord, type TableColumns } from './columns.js';
import { gridOrder, gridWhere } from './rows.js';
import type { Grid } from './views.js';

/** A string as an SQL literal: quotes and backslashes doubled in an escape string, so no setting changes its reading. */
const literal = (value: string) => `E'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;

/** What a client fragment is made of: its text pieces and, between them, values or nested fragments. */
interface FragmentParts {
  strings: readonly string[];
  args: readonly unknown[];
}
const isFragment = (value: unknown): value is FragmentParts =>
  typeof value === 'object' &&
  value !== null &&
  Array.isArray((value as FragmentParts).strings) &&
  Array.isArray((value as FragmentParts).args);

/**
 * A fragment made with the client's tag (gridWhere, gridOrder) as plain SQL text with its values
 * written as literals: `COPY` takes no parameters. Only text values occur in those fragments;
 * anything else is refused (null), and the caller exports another way.
 */
function inline(fragment: unknown): string | null {
  if (!isFragment(fragment)) return null;
  let text = fragment.strings[0]!;
  for (let i = 0; i < fragment.args.length; i += 1) {
    const arg = fragment.args[i];
    let part: string | null;
    if (typeof arg === 'string') part = arg.includes('\u0000') ? null : literal(arg);
    else part = inline(arg);
    if (part === null) return null;
    text += part + fragment.strings[i + 1]!;
  }
  return text;
}

/**
 * A number's JSON text as JavaScript's String(number) writes it. Every writer stores numbers as
 * JSON.stringify wrote them (the API's JSON, formula results), so the jsonb numeric's digits are
 * JavaScript's shortest digits and only the notation differs: numeric is always plain, while
 * JavaScript writes an exponent from 1e21 up and from 1e-7 down (`1e+21`, `1.5e-7`).
 */
const jsNumber = (t: string) => `case
    when ${t} ~ '^-?[0-9]{22}' then
      case when ${t} like '-%' then '-' else '' end
      || left(rtrim(replace(ltrim(${t}, '-'), '.', ''), '0'), 1)
      || case when length(rtrim(replace(ltrim(${t}, '-'), '.', ''), '0')) > 1
           then '.' || substr(rtrim(replace(ltrim(${t}, '-'), '.', ''), '0'), 2) else '' end
      || 'e+' || (length(split_part(ltrim(${t}, '-'), '.', 1)) - 1)
    when ${t} ~ '^-?0\\.0{6}' then
      case when ${t} like '-%' then '-' else '' end
      || left(ltrim(split_part(${t}, '.', 2), '0'), 1)
      || case when length(rtrim(ltrim(split_part(${t}, '.', 2), '0'), '0')) > 1
           then '.' || substr(rtrim(ltrim(split_part(${t}, '.', 2), '0'), '0'), 2) else '' end
      || 'e-' || (length(split_part(${t}, '.', 2)) - length(ltrim(split_part(${t}, '.', 2), '0')) + 1)
    else ${t}
  end`;

/**
 * A cell value (jsonb) as displayValue shows it, an empty one as NULL: `COPY` writes NULL as an
 * unquoted empty field (and an empty string as `""`). Objects and arrays are not rendered here
 * (JSON.stringify's spacing differs from jsonb's); callers only pass columns that cannot hold them.
 */
const displayValueSql = (v: string) => `case jsonb_typeof(${v})
    when 'string' then nullif(${v} #>> '{}', '')
    when 'boolean' then ${v} #>> '{}'
    when 'number' then ${jsNumber(`(${v} #>> '{}')`)}
  end`;

/**
 * Whether `exportGridCopy` can render these columns exactly as the grid shows them. Input cells
 * hold text, numbers and booleans (CellsSchema); formula results are the same kinds (a
 * FormulaOutcome's CellValue). Enrichment and agent results may be objects, whose JSON.stringify
 * text jsonb cannot reproduce. With one column, `COPY` quotes a lone `\.` (the end-of-data marker)
 * where the grid's CSV does not, so a one-column export is not this path's either.
 */
export const copyRenders = (shown: ColumnRecord[]) =>
  shown.length > 1 && shown.every((c) => !isComputed(c) || c.kind === 'formula');

/**
 * The grid's shown columns of every matching row in the grid's order, as CSV records streamed by
 * Postgres (no header). Null when the grid's conditions cannot be written without parameters.
 * A reader that stops early is answered by cancelling the query and draining what is in flight,
 * so the connection goes back to the pool.
 */
export async function exportGridCopy(
  sql: Sql,
  tableId: string,
  columns: TableColumns,
  grid: Grid,
  shown: ColumnRecord[],
): Promise<Readable | null> {
  const db: Db = sql;
  const where = inline(gridWhere(db, columns, grid));
  const order = inline(gridOrder(db, columns, grid.sorts));
  if (where === null || order === null) return null;
  const joins: string[] = [];
  const fields = shown.map((column, i) => {
    if (!isComputed(column)) {
      // displayValueSql with the text read once: `->>` is a string's text, `true`/`false` for a boolean.
      const key = literal(column.id);
      return `case jsonb_typeof(r.cells -> ${key})
          when 'number' then ${jsNumber(`(r.cells ->> ${key})`)}
          else nullif(r.cells ->> ${key}, '') end`;
    }
    // displayComputed: `#ERROR` for an error, the value once done, else nothing.
    joins.push(`left join table_cells c${i} on c${i}.column_id = ${literal(column.id)}::uuid and c${i}.row_id = r.id`);
    return `case c${i}.state when 'error' then '#ERROR' when 'done' then ${displayValueSql(`c${i}.value`)} end`;
  });
  // COPY takes no parameters, so this is the one unsafe statement: every value in it is a literal()
  // (the table and column ids, and the person's filter values inside `where`), and the rest is this
  // file's and gridWhere/gridOrder's own SQL text; a fragment holding anything else was refused above.
  const query = sql.unsafe(
    `copy (select ${fields.join(',\n')} from table_rows r ${joins.join(' ')}
      where r.table_id = ${literal(tableId)}::uuid and ${where} ${order}) to stdout (format csv)`,
  );
  const out = await query.readable();
  // The reader gets its own stream: the client's COPY stream, once destroyed, would leave its
  // connection paused mid-COPY for good.
  const pass = new PassThrough();
  out.once('error', (error) => pass.destroy(error));
  pass.once('close', () => {
    if (out.readableEnded) return;
    // Closed before the end (the client went away): stop the query and read what still arrives.
    out.unpipe(pass);
    out.on('error', () => {});
    query.cancel();
    out.resume();
  });
  out.pipe(pass);
  return pass;
}
