/**
 * A CSV at an address as an import source (decision 042): read through the page reader's address
 * checks, parsed as the table CSV upload parses (csv-parse, relaxed quotes and column counts), each
 * line upserted by its key column. An unchanged file (same SHA-256 as the last run) lands nothing;
 * a run repeated after a crash finds every key landed and adds nothing twice.
 */
import { parse } from 'csv-parse/sync';
import { createHash } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import { csvBytesMax } from '../../domain/tables/tables.js';
import type { Integrations } from '../../integrations/config.js';
import { CsvUrlFailure, readCsvUrl } from '../../integrations/crm/csv-url.js';
import type { ImportRow } from '../../store/sourcing/crm.js';
import { landImportPage } from './crm.js';

export class CsvUnreadable extends Error {
  override name = 'CsvUnreadable';
}

const pageSize = 1000;

export async function importCsvChunk(
  sql: Sql,
  integrations: Pick<Integrations, 'sourcing'>,
  imp: ImportRow,
  runId: string,
): Promise<{ done: boolean; read: number }> {
  let bytes: Buffer;
  try {
    bytes = await readCsvUrl(imp.csv_url!, {
      allowPrivateNetworks: integrations.sourcing.csvAllowPrivateNetworks,
      maxBytes: csvBytesMax,
    });
  } catch (error) {
    if (error instanceof CsvUrlFailure && !error.retryable) throw new CsvUnreadable(error.message);
    throw error;
  }
  const hash = createHash('sha256').update(bytes).digest('hex');
  if (hash === imp.content_hash) return { done: true, read: 0 };
  let lines: string[][];
  try {
    lines = parse(bytes.toString('utf8').replace(/^\uFEFF/, ''), {
      relax_quotes: true,
      relax_column_count: true,
      skip_empty_lines: true,
    });
  } catch (error) {
    throw new CsvUnreadable(`The CSV could not be read: ${(error as Error).message}`);
  }
  const [header, ...rows] = lines;
  if (!header) return { done: true, read: 0 };
  const keyAt = header.findIndex((h) => h.trim().toLowerCase() === imp.key_field.trim().toLowerCase());
  if (keyAt === -1)
    throw new CsvUnreadable(
      `The CSV has no column "${imp.key_field}" to key rows by (its header: ${header.slice(0, 20).join(', ')}).`,
    );
  const wanted = new Set(imp.mapping.map((m) => m.source.toLowerCase()));
  for (const m of imp.mapping)
    if (!header.some((h) => h.trim().toLowerCase() === m.source.toLowerCase()))
      throw new CsvUnreadable(`The CSV has no column "${m.source}".`);
  for (let i = 0; i < rows.length || i === 0; i += pageSize) {
    const page = rows.slice(i, i + pageSize).map((fields) => {
      const values: Record<string, string | null> = {};
      header.forEach((h, n) => {
        const source = imp.mapping.find((m) => m.source.toLowerCase() === h.trim().toLowerCase())?.source;
        if (source && wanted.has(source.toLowerCase())) values[source] = fields[n]?.trim() || null;
      });
      return { key: fields[keyAt]?.trim() || null, values, updatedAt: null, id: null };
    });
    const last = i + pageSize >= rows.length;
    await landImportPage(sql, imp, runId, page, { watermark: null, id: null }, last ? hash : null);
  }
  return { done: true, read: rows.length };
}
