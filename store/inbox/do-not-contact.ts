/** The do-not-contact list in Postgres: adding is idempotent (the unique key), listing is paged. */
import type { Db } from '../../db/sql.js';
import {
  guessDncKind,
  normalizeDncValue,
  normalizeEmail,
  normalizeProfileUrl,
  type DncBulkResult,
  type DncEntry,
  type DncKind,
  type DncListQuery,
} from '../../domain/inbox/do-not-contact.js';

interface EntryRow {
  id: string;
  kind: DncKind;
  value: string;
  reason: string | null;
  source: string;
  created_by: string | null;
  created_at: Date;
}

export const toEntry = (r: EntryRow): DncEntry => ({
  id: r.id,
  kind: r.kind,
  value: r.value,
  reason: r.reason,
  source: r.source,
  created_by: r.created_by,
  created_at: r.created_at.toISOString(),
});

export interface AddOptions {
  reason: string | null;
  source: string;
  createdBy: string | null;
}

/**
 * Adds entries, each judged on its own: an unreadable value is `invalid`, one already listed is
 * `exists` (adding twice is harmless), the rest `added`. One statement, so a large paste is fast.
 */
export async function addEntries(
  db: Db,
  workspaceId: string,
  entries: { kind?: DncKind; value: string }[],
  options: AddOptions,
): Promise<DncBulkResult> {
  const judged = entries.map((e, index) => {
    const kind = e.kind ?? guessDncKind(e.value);
    const normal = normalizeDncValue(kind, e.value);
    return { index, kind, ...normal };
  });
  const valid = judged.filter((j): j is typeof j & { value: string } => 'value' in j);
  const keys = [...new Map(valid.map((v) => [`${v.kind}\u0000${v.value}`, v])).values()];
  const inserted = keys.length
    ? await db<EntryRow[]>`
        insert into do_not_contact_entries (workspace_id, kind, value, reason, source, created_by)
        select ${workspaceId}, k, v, ${options.reason}, ${options.source}, ${options.createdBy}
        from unnest(${keys.map((k) => k.kind)}::text[], ${keys.map((k) => k.value)}::text[]) as t(k, v)
        on conflict (workspace_id, kind, value) do nothing
        returning *`
    : [];
  const present = keys.length
    ? await db<EntryRow[]>`
        select * from do_not_contact_entries
        where workspace_id = ${workspaceId} and (kind, value) in (
          select * from unnest(${keys.map((k) => k.kind)}::text[], ${keys.map((k) => k.value)}::text[]))`
    : [];
  const newIds = new Set(inserted.map((r) => r.id));
  const byKey = new Map(present.map((r) => [`${r.kind}\u0000${r.value}`, r]));
  // A value given twice in one request is added once: the first mention reads `added`.
  const claimed = new Set<string>();
  const results = judged.map((j): DncBulkResult['results'][number] => {
    if (!('value' in j))
      return { index: j.index, status: 'invalid', entry: null, detail: `Entry ${j.index}: ${j.error}.` };
    const row = byKey.get(`${j.kind}\u0000${j.value}`)!;
    const fresh = newIds.has(row.id) && !claimed.has(row.id);
    claimed.add(row.id);
    return { index: j.index, status: fresh ? 'added' : 'exists', entry: toEntry(row), detail: null };
  });
  return {
    added: results.filter((r) => r.status === 'added').length,
    existing: results.filter((r) => r.status === 'exists').length,
    invalid: results.filter((r) => r.status === 'invalid').length,
    results,
  };
}

export async function listEntries(db: Db, workspaceId: string, query: DncListQuery) {
  const where = db`
    where workspace_id = ${workspaceId}
    ${query.kind ? db`and kind = ${query.kind}` : db``}
    ${query.search ? db`and strpos(value, ${query.search.trim().toLowerCase()}) > 0` : db``}`;
  const rows = await db<
    EntryRow[]
  >`select * from do_not_contact_entries ${where} order by created_at desc, id limit ${query.limit} offset ${query.offset}`;
  const [count] = await db<{ total: number }[]>`select count(*)::int as total from do_not_contact_entries ${where}`;
  const total = count!.total;
  const next = query.offset + rows.length;
  return { entries: rows.map(toEntry), total, next_offset: next < total ? next : null };
}

export async function getEntry(db: Db, workspaceId: string, entryId: string): Promise<DncEntry | null> {
  const [row] = await db<
    EntryRow[]
  >`select * from do_not_contact_entries where id = ${entryId} and workspace_id = ${workspaceId}`;
  return row ? toEntry(row) : null;
}

export async function deleteEntry(db: Db, workspaceId: string, entryId: string): Promise<boolean> {
  const rows =
    await db`delete from do_not_contact_entries where id = ${entryId} and workspace_id = ${workspaceId} returning id`;
  return rows.length === 1;
}

/** The entries that block this email (itself or its domain) or profile URL. */
export async function matchingEntries(
  db: Db,
  workspaceId: string,
  who: { email?: string; profileUrl?: string },
): Promise<DncEntry[]> {
  const email = normalizeEmail(who.email);
  const profile = normalizeProfileUrl(who.profileUrl);
  const domain = email?.includes('@') ? email.split('@')[1]! : null;
  const rows = await db<EntryRow[]>`
    select * from do_not_contact_entries
    where workspace_id = ${workspaceId} and (
      (kind = 'email' and value = ${email}) or (kind = 'domain' and value = ${domain}) or (kind = 'profile_url' and value = ${profile}))
    order by created_at`;
  return rows.map(toEntry);
}
