/**
 * CRM use cases (decision 042): connect (the token checked against the CRM, then sealed), open a
 * connection's token, and the import and write-back steps the activities run in chunks.
 */
import { randomUUID } from 'node:crypto';
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import { propertyValue, type CrmObjectType } from '../../domain/sourcing/crm.js';
import type { Integrations } from '../../integrations/config.js';
import {
  crmBatchMax,
  hubspotClient,
  modifiedProperty,
  type CrmClient,
  type CrmObject,
  type UpsertInput,
} from '../../integrations/crm/hubspot.js';
import { SourceFailure } from '../../integrations/lead-search/http.js';
import { seal, unseal, SealedSecretError } from '../../integrations/secrets/sealed.js';
import { secretsKeyring } from '../platform/sealing.js';
import {
  getCrmConnection,
  insertCrmConnection,
  markCrmReconnect,
  recordImportPage,
  recordWriteBackBatch,
  writeBackBatch,
  type CrmConnectionRow,
  type ImportRow,
  type RowResult,
  type WriteBackRow,
} from '../../store/sourcing/crm.js';
import { ensureInputColumns, landRecords, lockTableLanding } from '../../store/sourcing/landing.js';
import { createHash } from 'node:crypto';

type SourcingIntegrations = Pick<Integrations, 'sourcing' | 'secretsKeys'>;

export const crmClientOf = (integrations: Pick<Integrations, 'sourcing'>): CrmClient =>
  hubspotClient(integrations.sourcing.crm);

const tokenContext = (workspaceId: string, id: string) => `crm_connections:${workspaceId}:${id}:token`;

/** Checks the token against the CRM (its account), seals it and stores the connection. */
export async function connectCrm(
  sql: Sql,
  integrations: SourcingIntegrations,
  caller: { workspaceId: string; memberId: string | null },
  input: { name: string; access_token: string },
) {
  let accountId: string | null;
  try {
    accountId = await crmClientOf(integrations).accountId(input.access_token);
  } catch (error) {
    if (error instanceof SourceFailure && (error.reason === 'unauthorized' || error.reason === 'refused')) {
      throw new ValidationRefusal([
        { loc: ['body', 'access_token'], msg: 'the CRM refused this token', type: 'value_error', input: '(hidden)' },
      ]);
    }
    if (error instanceof SourceFailure)
      throw new ApiError('bad_gateway', `The CRM could not be reached to check the token: ${error.message}`);
    throw error;
  }
  const id = randomUUID();
  const keyring = await secretsKeyring(sql, integrations);
  const row = await insertCrmConnection(sql, {
    id,
    workspaceId: caller.workspaceId,
    name: input.name,
    tokenSealed: seal(keyring, input.access_token, tokenContext(caller.workspaceId, id)),
    accountId,
    connectedBy: caller.memberId,
  });
  if (!row) throw new ApiError('conflict', `The workspace already has a CRM connection named "${input.name}".`);
  return row;
}

/** The connection's token, opened; a token that does not open marks the connection for reconnecting. */
export async function crmToken(
  sql: Sql,
  integrations: SourcingIntegrations,
  connection: CrmConnectionRow,
): Promise<string> {
  try {
    return unseal(
      await secretsKeyring(sql, integrations),
      connection.token_sealed,
      tokenContext(connection.workspace_id, connection.id),
    );
  } catch (error) {
    if (error instanceof SealedSecretError) {
      await markCrmReconnect(sql, connection.id, `${error.message} Connect the CRM again.`);
      throw new CrmRefusal(`The stored CRM token cannot be opened: ${error.message} Connect the CRM again.`);
    }
    throw error;
  }
}

/** A failure no retry fixes (a refused token, a refused request): recorded as the run's error. */
export class CrmRefusal extends Error {
  override name = 'CrmRefusal';
}

/** Calls the CRM, waiting out 429s for as long as it asks (Retry-After, 1 to 60 s), up to `tries` times; `beat` keeps an activity alive meanwhile. */
export async function withRateLimit<T>(
  call: () => Promise<T>,
  beat: () => void = () => undefined,
  tries = 6,
): Promise<T> {
  for (let n = 1; ; n += 1) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof SourceFailure) || error.reason !== 'rate_limited' || n >= tries) throw error;
      const wait = Math.min(60, Math.max(1, error.retryAfterSeconds ?? 1)) * 1000;
      beat();
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

const refusal = (error: unknown, connection: { id: string }, sql: Db): Promise<never> | never => {
  if (error instanceof SourceFailure && error.reason === 'unauthorized') {
    return markCrmReconnect(sql, connection.id, error.message).then(() => {
      throw new CrmRefusal(`${error.message} Connect the CRM again.`);
    });
  }
  if (error instanceof SourceFailure && error.reason === 'refused') throw new CrmRefusal(error.message);
  throw error;
};

// ---------------------------------------------------------------------------------------------
// Import

export interface ChunkOutcome {
  done: boolean;
  read: number;
}

/** The table's columns of an import's mapping (made when missing): source field → column id. */
export async function importColumns(
  tx: Db,
  imp: Pick<ImportRow, 'workspace_id' | 'table_id' | 'mapping'>,
): Promise<Map<string, string>> {
  const ids = await ensureInputColumns(
    tx,
    imp.workspace_id,
    imp.table_id,
    imp.mapping.map((m) => m.column_name),
  );
  return new Map(imp.mapping.map((m) => [m.source, ids[m.column_name]!]));
}

const cellText = (v: string) => (v.length > 10_000 ? v.slice(0, 10_000) : v);

/**
 * Lands one page of records (upsert by key) and moves the watermark to the page's last change
 * time, in one transaction, only while the watermark is where the page was read from.
 */
export async function landImportPage(
  sql: Sql,
  imp: ImportRow,
  runId: string,
  records: { key: string | null; values: Record<string, string | null>; updatedAt: string | null; id: string | null }[],
  to: { watermark: Date | null; id: string | null },
  contentHash?: string | null,
): Promise<boolean> {
  return sql
    .begin<boolean>(async (tx) => {
      const columns = await importColumns(tx, imp);
      await lockTableLanding(tx, imp.table_id);
      const keyed = records.filter((r) => r.key !== null && r.key !== '');
      const landed = await landRecords(tx, {
        workspaceId: imp.workspace_id,
        tableId: imp.table_id,
        source: `import:${imp.id}`,
        mode: 'upsert',
        records: keyed.map((r) => ({
          key: `${imp.source === 'crm' ? `crm:${imp.connection_id}:${imp.object_type}` : 'csv'}:${r.key!.toLowerCase()}`,
          cells: Object.fromEntries(
            [...columns].flatMap(([source, column]) =>
              r.values[source] ? [[column, cellText(r.values[source])]] : [],
            ),
          ),
        })),
      });
      return recordImportPage(tx, {
        runId,
        importId: imp.id,
        from: { watermark: imp.watermark, id: imp.watermark_id },
        to,
        read: records.length,
        created: landed.created,
        updated: landed.updated,
        unchanged: landed.unchanged,
        rejected: records.length - keyed.length,
        contentHash: contentHash ?? null,
      }).then((moved) => {
        if (!moved) throw new StaleWatermark();
        return true;
      });
    })
    .catch((error: unknown) => {
      if (error instanceof StaleWatermark) return false;
      throw error;
    });
}

class StaleWatermark extends Error {}

/**
 * Reads and lands up to `pages` pages of a CRM import after its watermark: a search for what
 * changed at or after it (with the import's filters), oldest change first; or, for a list, its
 * members read in batches. Answers whether the import has read everything there is now.
 */
export async function importCrmChunk(
  sql: Sql,
  integrations: SourcingIntegrations,
  imp: ImportRow,
  runId: string,
  o: {
    pages: number;
    pageSize: number;
    landEvery?: number;
    beat?: () => void;
    readImport: () => Promise<ImportRow | undefined>;
  },
): Promise<ChunkOutcome> {
  const connection = await getCrmConnection(sql, imp.workspace_id, imp.connection_id!);
  if (!connection) throw new CrmRefusal('The CRM connection of this import was deleted.');
  const token = await crmToken(sql, integrations, connection);
  const client = crmClientOf(integrations);
  const type = imp.object_type!;
  const properties = [...new Set([...imp.mapping.map((m) => m.source), imp.key_field, modifiedProperty[type]])];
  const toRecord = (o: CrmObject) => ({
    key: imp.key_field === 'hs_object_id' ? o.id : (o.properties[imp.key_field] ?? null),
    values: { ...o.properties, hs_object_id: o.id },
    updatedAt: o.updatedAt,
    id: o.id,
  });
  let current = imp;
  let read = 0;
  try {
    if (imp.list_id) {
      // A list: its members in batches; each run reads the whole list and lands what changed.
      let after: string | null = null;
      for (;;) {
        const members = await withRateLimit(() => client.listMembers(token, imp.list_id!, after), o.beat);
        for (let i = 0; i < members.ids.length; i += crmBatchMax) {
          const objects = await withRateLimit(
            () => client.batchRead(token, type, members.ids.slice(i, i + crmBatchMax), properties),
            o.beat,
          );
          const fresh = (await o.readImport())!;
          if (
            !(await landImportPage(sql, fresh, runId, objects.map(toRecord), {
              watermark: fresh.watermark,
              id: fresh.watermark_id,
            }))
          )
            return { done: true, read };
          read += objects.length;
          o.beat?.();
        }
        if (!members.after) return { done: true, read };
        after = members.after;
      }
    }
    const filters = imp.filters.map((f) => ({
      propertyName: f.property,
      operator: f.operator,
      ...(f.value === undefined ? {} : { value: f.value }),
    }));
    let after: string | null = null;
    // The query stays the same while it is paged by `after`; it starts again from the watermark
    // committed last (a new chunk, or before the search's paging limit). Pages are landed
    // `landEvery` records at a time, each landing one transaction with the watermark moved.
    let since: { propertyName: string; operator: string; value: string }[] = [];
    let buffer: CrmObject[] = [];
    const land = async (): Promise<boolean> => {
      if (buffer.length === 0) return true;
      const last = buffer.at(-1)!;
      const landed = await landImportPage(sql, current, runId, buffer.map(toRecord), {
        watermark: new Date(last.updatedAt),
        id: last.id,
      });
      read += buffer.length;
      buffer = [];
      o.beat?.();
      current = (await o.readImport())!;
      return landed;
    };
    for (let page = 0; page < o.pages; page += 1) {
      if (after === null)
        since = current.watermark
          ? [{ propertyName: modifiedProperty[type], operator: 'GTE', value: current.watermark.toISOString() }]
          : [];
      const answer = await withRateLimit(
        () =>
          client.search(token, type, {
            filters: [...filters, ...since],
            sort: { propertyName: modifiedProperty[type], direction: 'ASCENDING' },
            after,
            limit: o.pageSize,
            properties,
          }),
        o.beat,
      );
      buffer.push(...answer.results);
      // The search pages at most 10,000 deep: start again from the new watermark well before.
      const restart = !answer.after || Number(answer.after) >= 9_000;
      if (restart || buffer.length >= (o.landEvery ?? 1000)) {
        if (!(await land())) return { done: true, read };
      }
      if (!answer.after) return { done: true, read };
      after = restart ? null : answer.after;
    }
    if (!(await land())) return { done: true, read };
    return { done: false, read };
  } catch (error) {
    return refusal(error, connection, sql);
  }
}

// ---------------------------------------------------------------------------------------------
// Write-back

/** The properties a row writes, as a stable fingerprint: the same values again write nothing. */
export function propertiesHash(properties: Record<string, string>): string {
  const sorted = Object.keys(properties)
    .sort()
    .map((k) => [k, properties[k]]);
  return createHash('sha256').update(JSON.stringify(sorted)).digest('base64url').slice(0, 32);
}

export const resultText = (r: RowResult) =>
  r.result === 'written'
    ? `written ${r.objectId ?? ''}`.trim()
    : r.result === 'unchanged'
      ? `unchanged ${r.objectId ?? ''}`.trim()
      : `failed: ${r.error ?? 'refused'}`.slice(0, 2000);

/**
 * Upserts inputs in one batch call; a whole batch the CRM refuses (4xx) is split in halves until
 * the refused rows stand alone, so a failed row never sinks the others. Answers per id value.
 */
async function upsertAll(
  client: CrmClient,
  token: string,
  type: CrmObjectType,
  inputs: UpsertInput[],
  beat?: () => void,
): Promise<Map<string, { objectId: string | null; error: string | null }>> {
  const out = new Map<string, { objectId: string | null; error: string | null }>();
  if (inputs.length === 0) return out;
  try {
    const answer = await withRateLimit(() => client.batchUpsert(token, type, inputs), beat);
    for (const e of answer.errors)
      for (const id of e.ids) out.set(id.toLowerCase(), { objectId: null, error: e.message });
    for (const r of answer.results) {
      const idProperty = inputs[0]!.idProperty;
      const value = r.properties[idProperty];
      if (value) out.set(value.toLowerCase(), { objectId: r.id, error: null });
    }
    for (const i of inputs)
      if (!out.has(i.id.toLowerCase()))
        out.set(i.id.toLowerCase(), { objectId: null, error: 'The CRM answered nothing for this record.' });
    return out;
  } catch (error) {
    if (!(error instanceof SourceFailure) || error.reason !== 'refused') throw error;
    if (inputs.length === 1) return new Map([[inputs[0]!.id.toLowerCase(), { objectId: null, error: error.message }]]);
    const half = Math.ceil(inputs.length / 2);
    const [a, b] = [
      await upsertAll(client, token, type, inputs.slice(0, half), beat),
      await upsertAll(client, token, type, inputs.slice(half), beat),
    ];
    return new Map([...a, ...b]);
  }
}

/** One batch of a write-back: rows after the cursor, unchanged ones skipped, the rest upserted; results recorded with the cursor moved. */
export async function writeBackChunk(
  sql: Sql,
  integrations: SourcingIntegrations,
  w: WriteBackRow,
  o: { batches: number; beat?: () => void; reread: () => Promise<WriteBackRow | undefined> },
): Promise<{ done: boolean }> {
  const connection = await getCrmConnection(sql, w.workspace_id, w.connection_id);
  if (!connection) throw new CrmRefusal('The CRM connection of this write-back was deleted.');
  const token = await crmToken(sql, integrations, connection);
  const client = crmClientOf(integrations);
  let current = w;
  try {
    for (let n = 0; n < o.batches; n += 1) {
      // Five CRM batches a round: their upserts go out together, their results land in one transaction.
      const rows = await writeBackBatch(sql, current, crmBatchMax * 5);
      if (rows.length === 0) return { done: true };
      const results: RowResult[] = [];
      const sending: { rowId: string; input: UpsertInput; hash: string }[] = [];
      const seen = new Set<string>();
      for (const row of rows) {
        const properties: Record<string, string> = {};
        for (const m of current.mapping) {
          const v = propertyValue(row.cells[m.column_id]);
          if (v !== null) properties[m.property] = v;
        }
        const idValue = properties[current.id_property];
        if (!idValue) {
          results.push({
            rowId: row.id,
            result: 'failed',
            objectId: null,
            error: `The row has no value for ${current.id_property}.`,
            hash: null,
          });
          continue;
        }
        if (seen.has(idValue.toLowerCase())) {
          results.push({
            rowId: row.id,
            result: 'failed',
            objectId: null,
            error: `Another row of this batch has the same ${current.id_property} (${idValue}).`,
            hash: null,
          });
          continue;
        }
        seen.add(idValue.toLowerCase());
        const hash = propertiesHash(properties);
        if (hash === row.written_hash) {
          results.push({ rowId: row.id, result: 'unchanged', objectId: null, error: null, hash });
          continue;
        }
        sending.push({ rowId: row.id, input: { id: idValue, idProperty: current.id_property, properties }, hash });
      }
      const groups = Array.from({ length: Math.ceil(sending.length / crmBatchMax) }, (_, i) =>
        sending.slice(i * crmBatchMax, (i + 1) * crmBatchMax),
      );
      const answers = new Map(
        (
          await Promise.all(
            groups.map((g) =>
              upsertAll(
                client,
                token,
                current.object_type,
                g.map((s) => s.input),
                o.beat,
              ),
            ),
          )
        ).flatMap((m) => [...m]),
      );
      for (const s of sending) {
        const a = answers.get(s.input.id.toLowerCase())!;
        results.push(
          a.error
            ? { rowId: s.rowId, result: 'failed', objectId: null, error: a.error, hash: null }
            : { rowId: s.rowId, result: 'written', objectId: a.objectId, error: null, hash: s.hash },
        );
      }
      const moved = await recordWriteBackBatch(sql, current, current.after_seq, rows.at(-1)!.seq, results, resultText);
      o.beat?.();
      const again = await o.reread();
      if (!moved || !again || again.status !== 'running') return { done: true };
      current = again;
    }
    return { done: false };
  } catch (error) {
    return refusal(error, connection, sql);
  }
}

export const notFoundConnection = () => notFound('CRM connection');
