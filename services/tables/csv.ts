/**
 * CSV in and out of a table, streamed both ways. An upload is read a chunk at a time (csv-parse)
 * and its good lines stream into table_rows with `COPY` as they are read, all in one transaction
 * (store/tables/row-load.ts): a line that cannot be a row is reported with its line number and
 * every good line lands; only a broken upload (too large, cut off, too many columns) writes
 * nothing. An export streams the grid (a view, filters, sorts) with the values a person sees,
 * written by Postgres in one `COPY … TO` where SQL renders them exactly, else through a cursor.
 */
import { parse, type CsvError, type Options as CsvOptions } from 'csv-parse';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import {
  cellTextMax,
  columnsPerTable,
  csvBytesMax,
  csvRejectedListed,
  displayComputed,
  displayValue,
  type CsvImportQuery,
  type CsvImportReport,
  type CsvRejectedLine,
  type RowQuery,
} from '../../domain/tables/tables.js';
import {
  createInputColumns,
  isComputed,
  listColumns,
  loadColumns,
  type ColumnRecord,
  type TableColumns,
} from '../../store/tables/columns.js';
import { startRowLoad, type RowLoad } from '../../store/tables/row-load.js';
import { gridRowsCursor, type RowRecord } from '../../store/tables/rows.js';
import { resolveGrid, type Grid } from '../../store/tables/views.js';
import { copyRenders, exportGridCopy } from '../../store/tables/row-export.js';
import { requireTable } from '../../store/tables/tables.js';

const batchSize = 1000;

const tooLarge = () => new ApiError('payload_too_large', `A CSV upload is at most ${csvBytesMax} bytes (50 MiB).`);

/**
 * Bytes to text with every line ending made `\n` (so line numbers are counted one way), the
 * byte order mark dropped, and the upload refused past the size limit. Counts the lines seen.
 */
class CsvText extends Transform {
  private readonly decoder = new StringDecoder('utf8');
  private bytes = 0;
  private started = false;
  private heldReturn = false;
  newlines = 0;
  endsWithNewline = true;

  constructor(private readonly limit: number) {
    super({ readableObjectMode: false, decodeStrings: true });
  }

  private forward(text: string) {
    let out = (this.heldReturn ? '\r' : '') + text;
    this.heldReturn = out.endsWith('\r');
    if (this.heldReturn) out = out.slice(0, -1);
    if (!this.started && out.length > 0) {
      this.started = true;
      if (out.startsWith('\uFEFF')) out = out.slice(1);
    }
    out = out.replace(/\r\n?/g, '\n');
    for (let i = out.indexOf('\n'); i !== -1; i = out.indexOf('\n', i + 1)) this.newlines += 1;
    if (out.length > 0) this.endsWithNewline = out.endsWith('\n');
    if (out.length > 0) this.push(out);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) return done(tooLarge());
    this.forward(this.decoder.write(chunk));
    done();
  }

  override _flush(done: TransformCallback) {
    this.forward(this.decoder.end());
    if (this.heldReturn) {
      this.heldReturn = false;
      this.forward('\n');
    }
    done();
  }

  get lines() {
    return this.newlines + (this.endsWithNewline ? 0 : 1);
  }
}

/** The first rejected lines in file order, however many there are; the count covers them all. */
class RejectedLines {
  private listed: CsvRejectedLine[] = [];
  count = 0;
  add(line: number, reason: string) {
    this.count += 1;
    this.listed.push({ line, reason });
    if (this.listed.length > 2 * csvRejectedListed) this.trim();
  }
  private trim() {
    this.listed.sort((a, b) => a.line - b.line);
    this.listed.length = Math.min(this.listed.length, csvRejectedListed);
  }
  list() {
    this.trim();
    return this.listed;
  }
}

const cleanHeader = (raw: string, index: number) => {
  const name = raw
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .trim()
    .slice(0, 255);
  return name || `Column ${index + 1}`;
};

/** `Name`, else `Name (2)`, `Name (3)`... whichever no column has yet (case ignored). */
function freeName(name: string, taken: Set<string>): string {
  for (let n = 1; ; n += 1) {
    const suffix = n === 1 ? '' : ` (${n})`;
    const candidate = name.slice(0, 255 - suffix.length) + suffix;
    if (!taken.has(candidate.toLowerCase())) return candidate;
  }
}

interface HeaderPlan {
  /** The column each field goes to, by field index; null leaves the field out. */
  targets: (string | null)[];
  create: { index: number; name: string }[];
}

/** Explicit `map` entries first (by field number), then a column of the same name, then a new column or nothing. */
function planHeaders(headers: string[], columns: TableColumns, query: CsvImportQuery): HeaderPlan {
  const targets: (string | null)[] = headers.map(() => null);
  const used = new Set<string>();
  for (const entry of query.map ?? []) {
    const [rawId, field] = entry.split(':');
    const column = columns.byId.get(rawId!.toLowerCase());
    if (!column) throw new ApiError('conflict', `The table has no column ${rawId}.`);
    if (isComputed(column))
      throw new ApiError('conflict', `"${column.name}" is a ${column.kind} column; a CSV cannot write to it.`);
    const index = Number(field) - 1;
    if (index >= headers.length)
      throw new ApiError('conflict', `The map names field ${field}; the header has ${headers.length} fields.`);
    // The first entry for a field or a column wins.
    if (targets[index] === null && !used.has(column.id)) {
      targets[index] = column.id;
      used.add(column.id);
    }
  }
  const taken = new Set(columns.list.map((c) => c.name.toLowerCase()));
  const create: HeaderPlan['create'] = [];
  headers.forEach((header, index) => {
    if (targets[index] !== null) return;
    const same = columns.list.find((c) => c.name.toLowerCase() === header.toLowerCase());
    if (same && !isComputed(same) && !used.has(same.id)) {
      targets[index] = same.id;
      used.add(same.id);
    } else if (query.unmapped === 'create') {
      const name = freeName(header, taken);
      taken.add(name.toLowerCase());
      create.push({ index, name });
    }
  });
  return { targets, create };
}

function rowProblem(fields: string[], headers: string[]): string | null {
  if (fields.length !== headers.length)
    return `The line has ${fields.length} fields; the header has ${headers.length}.`;
  for (let i = 0; i < fields.length; i += 1) {
    if (fields[i]!.length > cellTextMax)
      return `The field under "${headers[i]}" is longer than ${cellTextMax} characters.`;
    if (fields[i]!.includes('\u0000')) return `The field under "${headers[i]}" contains a NUL character.`;
  }
  return null;
}

export async function importCsv(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  body: Readable,
  query: CsvImportQuery,
): Promise<CsvImportReport> {
  const text = new CsvText(csvBytesMax);
  const rejected = new RejectedLines();
  let nextLine = 1;
  const options: CsvOptions<LineRecord, string[]> = {
    delimiter: query.delimiter,
    record_delimiter: '\n',
    // A stray quote inside a field is text, not an error that would swallow the lines after it.
    relax_quotes: true,
    relax_column_count: true,
    skip_records_with_error: true,
    on_record: (record, context) => {
      const line = nextLine;
      nextLine = context.lines + 1;
      return { fields: record, line };
    },
  };
  const parser = parse(options as unknown as CsvOptions);
  // Only an opening quote that never closes is left as an error: CSV reads the rest as its field.
  // The error of a skipped record carries the parser's line count.
  parser.on('skip', (error: CsvError & { lines: number }) => {
    const reason =
      error.lines > nextLine
        ? `A quote opened on this line never closes, so lines ${nextLine} to ${error.lines} could not be read.`
        : 'A quote opened on this line never closes.';
    rejected.add(nextLine, reason);
    nextLine = error.lines + 1;
  });
  body.on('error', (error) => text.destroy(error));
  text.on('error', (error) => parser.destroy(error));
  body.pipe(text);
  text.pipe(parser);

  try {
    return await readInto(sql, workspaceId, tableId, query, text, parser as never, rejected);
  } finally {
    // Refused part-way (too large, too many columns): the rest of the upload is read and dropped,
    // so the connection stays usable for the answer.
    if (!body.readableEnded) {
      body.unpipe(text);
      body.resume();
    }
  }
}

interface LineRecord {
  fields: string[];
  /** Where the record starts: a quoted field may run over several lines. */
  line: number;
}

async function readInto(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  query: CsvImportQuery,
  text: CsvText,
  parser: AsyncIterable<LineRecord>,
  rejected: RejectedLines,
): Promise<CsvImportReport> {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'update');
    let columns = await loadColumns(tx, tableId);
    let headers: string[] | undefined;
    let plan: HeaderPlan | undefined;
    /** The fields that go to a column, by field index, and the load they stream into. */
    let kept: number[] = [];
    let load: RowLoad | undefined;
    const created: string[] = [];
    let added = 0;

    try {
      for await (const { fields, line } of parser) {
        if (fields.length === 1 && fields[0] === '') continue; // an empty line
        if (!headers) {
          headers = fields.map(cleanHeader);
          plan = planHeaders(headers, columns, query);
          if (columns.list.length + plan.create.length > columnsPerTable) {
            throw new ApiError(
              'conflict',
              `The file would give the table ${columns.list.length + plan.create.length} columns; a table has at most ${columnsPerTable}.`,
            );
          }
          const ids = await createInputColumns(
            tx,
            workspaceId,
            tableId,
            columns.list.length,
            plan.create.map((c) => c.name),
          );
          plan.create.forEach((c, i) => (plan!.targets[c.index] = ids[i]!));
          created.push(...ids);
          columns = await loadColumns(tx, tableId);
          kept = plan.targets.flatMap((target, i) => (target ? [i] : []));
          load = startRowLoad(
            tx,
            workspaceId,
            tableId,
            columns,
            kept.map((i) => plan!.targets[i]!),
          );
          continue;
        }
        const problem = rowProblem(fields, headers);
        if (problem) {
          rejected.add(line, problem);
          continue;
        }
        await load!.add(kept.map((i) => fields[i]!));
      }
      if (load) added = await load.finish();
    } catch (error) {
      load?.abort(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }

    const createdSet = new Set(created);
    return {
      lines_read: text.lines,
      rows_added: added,
      rejected_count: rejected.count,
      rejected: rejected.list(),
      columns_created: listColumns(columns).filter((c) => createdSet.has(c.id)),
      mapping: (headers ?? []).map((header, i) => ({ header, column_id: plan!.targets[i] ?? null })),
    };
  });
}

/** The grid as CSV: a header of column names, then each row as the grid shows it. */
/** A field quoted (quotes doubled) when it holds a delimiter, a quote or a line break, as RFC 4180 asks. */
const csvField = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value);
/** One CSV record with its line break (LF, as the export always wrote). */
export const csvLine = (fields: string[]) => `${fields.map(csvField).join(',')}\n`;

/**
 * The grid as CSV. When every shown column can be rendered in SQL exactly as the grid shows it
 * (copyRenders: input and formula columns, two or more of them), Postgres writes the rows with
 * one `COPY … TO STDOUT` (store/tables/row-export.ts) after the header written here; otherwise
 * (enrichment or agent columns, whose results may be objects; a single column; a filter value SQL
 * cannot carry as a literal) the rows are rendered here, batch by batch, as they always were. The
 * choice is made once per export.
 */
export async function exportCsv(sql: Sql, workspaceId: string, tableId: string, query: RowQuery): Promise<Readable> {
  await requireTable(sql, workspaceId, tableId);
  const columns = await loadColumns(sql, tableId);
  const grid = await resolveGrid(sql, tableId, columns, query);
  const shown = grid.columnIds.map((id) => columns.byId.get(id)!);
  const copied = copyRenders(shown) ? await exportGridCopy(sql, tableId, columns, grid, shown) : null;
  if (!copied) return renderedRows(sql, tableId, columns, grid, shown);
  const rows = copied;
  async function* chunks() {
    yield csvLine(shown.map((c) => c.name));
    yield* rows;
  }
  // A client that goes away ends the generator, and with it the copy (its query is cancelled).
  return Readable.from(chunks(), { objectMode: false });
}

/** The grid as CSV with each row rendered here (displayValue, displayComputed): the export's other path. */
export async function exportCsvRendered(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  query: RowQuery,
): Promise<Readable> {
  await requireTable(sql, workspaceId, tableId);
  const columns = await loadColumns(sql, tableId);
  const grid = await resolveGrid(sql, tableId, columns, query);
  return renderedRows(
    sql,
    tableId,
    columns,
    grid,
    grid.columnIds.map((id) => columns.byId.get(id)!),
  );
}

function renderedRows(sql: Sql, tableId: string, columns: TableColumns, grid: Grid, shown: ColumnRecord[]): Readable {
  const cellOf = (row: RowRecord, column: ColumnRecord) =>
    isComputed(column) ? displayComputed(row.computed[column.id]) : displayValue(row.cells[column.id]);

  // One chunk per batch of rows, written here rather than by a CSV transform fed a record at a
  // time: the per-record stream and option handling was most of the export's CPU.
  async function* chunks() {
    yield csvLine(shown.map((c) => c.name));
    const cursor = gridRowsCursor(sql, tableId, columns, grid, batchSize);
    for await (const rows of cursor) {
      let chunk = '';
      for (const row of rows) chunk += csvLine(shown.map((c) => cellOf(row, c)));
      yield chunk;
    }
  }
  // A client that goes away ends the generator, and with it the cursor and its connection.
  return Readable.from(chunks(), { objectMode: false });
}
