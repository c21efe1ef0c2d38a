import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { pruneTableChanges } from '../../store/tables/changes.js';
import { TableEventHub } from '../../services/tables/events.js';
import { createSql } from '../../db/sql.js';
import { dataOf, SseStream, type SseEvent } from '../support/sse.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
let base: string;
beforeAll(async () => {
  api = tablesClient(stack, withKey(paid.apiKey));
  // Streams are read over real HTTP: inject answers only once a response has ended.
  await stack.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
});

const opened: SseStream[] = [];
afterEach(() => opened.splice(0).forEach((s) => s.close()));

async function subscribe(tableId: string, options: { lastEventId?: string | number; once?: boolean } = {}) {
  const headers: Record<string, string> = { ...withKey(paid.apiKey), accept: 'text/event-stream' };
  if (options.lastEventId !== undefined) headers['last-event-id'] = String(options.lastEventId);
  const stream = await SseStream.open(`${base}/tables/${tableId}/events/${options.once ? '?once=true' : ''}`, headers);
  opened.push(stream);
  expect(stream.response.status).toBe(200);
  expect(stream.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  return stream;
}

/** Subscribes and reads the first event, which must be `ready`. */
async function ready(tableId: string, lastEventId?: string | number) {
  const stream = await subscribe(tableId, { lastEventId });
  const first = await stream.next();
  expect({ event: first.event, data: dataOf(first) }).toEqual({ event: 'ready', data: { table_id: tableId } });
  return { stream, id: Number(first.id) };
}

const plain = (events: SseEvent[]) => events.map((e) => ({ event: e.event, data: dataOf(e) }));
const idsOf = (events: SseEvent[]) => events.map((e) => Number(e.id));
const increasing = (ids: number[]) => ids.every((id, i) => i === 0 || id > ids[i - 1]!);
const take = async (stream: SseStream, n: number) => {
  const events: SseEvent[] = [];
  for (let i = 0; i < n; i += 1) events.push(await stream.next());
  return events;
};

const csv = (tableId: string, body: string) =>
  stack.app.inject({
    method: 'POST',
    url: `/tables/${tableId}/csv/`,
    headers: { ...withKey(paid.apiKey), 'content-type': 'text/csv' },
    payload: body,
  });

/** Waits for a condition the server reaches on its own (as long as the test's 60 s timeout). */
const eventually = (check: () => boolean) =>
  vi.waitFor(
    () => {
      if (!check()) throw new Error('condition never held');
    },
    { timeout: 60_000, interval: 20 },
  );

describe('the change feed', () => {
  it('shows two subscribers the same row add and cell change, in order, with the computed cells', async () => {
    const table = await api.table({ name: 'Feed' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const greeting = await api.column(table.id, {
      kind: 'formula',
      name: 'Greeting',
      formula: 'concat("Hi ", {Name})',
    });
    const first = await ready(table.id);
    const second = await ready(table.id);
    expect(second.id).toBe(first.id);

    const row = (await api.post(`/tables/${table.id}/rows/`, { cells: { [name.id]: 'Ada' } })).json();
    expect((await api.patch(`/tables/${table.id}/rows/${row.id}/`, { cells: { [name.id]: 'Grace' } })).statusCode).toBe(
      200,
    );

    const cell = (value: string) => ({
      row_id: row.id,
      column_id: greeting.id,
      state: 'done',
      value,
      error: null,
      cost: 0,
    });
    const expected = [
      { event: 'rows_added', data: { table_id: table.id, row_ids: [row.id] } },
      { event: 'cells_updated', data: { table_id: table.id, cells: [cell('Hi Ada')] } },
      { event: 'rows_updated', data: { table_id: table.id, rows: [{ id: row.id, cells: { [name.id]: 'Grace' } }] } },
      { event: 'cells_updated', data: { table_id: table.id, cells: [cell('Hi Grace')] } },
    ];
    const seenByFirst = await take(first.stream, 4);
    const seenBySecond = await take(second.stream, 4);
    expect(plain(seenByFirst)).toEqual(expected);
    expect(plain(seenBySecond)).toEqual(expected);
    expect(idsOf(seenBySecond)).toEqual(idsOf(seenByFirst));
    expect(increasing([first.id, ...idsOf(seenByFirst)])).toBe(true);
  });

  it('records every write path: bulk add, update and delete, CSV import, a formula computed again, a single delete', async () => {
    const table = await api.table({ name: 'Paths' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const { stream } = await ready(table.id);

    const added = (
      await api.post(`/tables/${table.id}/rows/bulk/`, {
        rows: [{ cells: { [name.id]: 'a' } }, { cells: { [name.id]: 'b' } }, { cells: {} }],
      })
    ).json();
    const [a, b, c] = added.results.map((r: { id: string }) => r.id) as [string, string, string];
    await api.patch(`/tables/${table.id}/rows/bulk/`, {
      rows: [
        { id: a, cells: { [name.id]: 'A' } },
        { id: c, cells: { [name.id]: 'C' } },
        { id: b, cells: {} },
      ],
    });
    await api.post(`/tables/${table.id}/rows/bulk-delete/`, { row_ids: [b] });
    expect((await csv(table.id, 'Name\nd\n')).statusCode).toBe(200);
    const upper = await api.column(table.id, { kind: 'formula', name: 'Upper', formula: 'concat({Name}, "!")' });
    expect((await api.del(`/tables/${table.id}/rows/${a}/`)).statusCode).toBe(204);

    const events = await stream.until(
      (e) => e.event === 'rows_deleted' && dataOf<{ row_ids: string[] }>(e).row_ids[0] === a,
    );
    expect(plain(events)).toEqual([
      { event: 'rows_added', data: { table_id: table.id, row_ids: [a, b, c] } },
      // Only the cells that changed, and nothing for a row whose cells stayed as they were.
      {
        event: 'rows_updated',
        data: {
          table_id: table.id,
          rows: [
            { id: a, cells: { [name.id]: 'A' } },
            { id: c, cells: { [name.id]: 'C' } },
          ],
        },
      },
      { event: 'rows_deleted', data: { table_id: table.id, row_ids: [b] } },
      { event: 'rows_added', data: { table_id: table.id, row_ids: [expect.any(String)] } },
      // A new formula column: the column, then one event for all its cells, not one per thousand.
      { event: 'columns_changed', data: { table_id: table.id, change: 'added', column_ids: [upper.id] } },
      { event: 'column_recomputed', data: { table_id: table.id, column_id: upper.id } },
      { event: 'rows_deleted', data: { table_id: table.id, row_ids: [a] } },
    ]);
    expect(increasing(idsOf(events))).toBe(true);
  });

  it('tells of columns added, renamed and deleted, and of a formula computed again over every row as one event', async () => {
    const table = await api.table({ name: 'Columns' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    expect(
      (await csv(table.id, `Name\n${Array.from({ length: 2500 }, (_, i) => `n${i}`).join('\n')}\n`)).statusCode,
    ).toBe(200);
    const { stream } = await ready(table.id);

    const upper = await api.column(table.id, { kind: 'formula', name: 'Upper', formula: 'upper({Name})' });
    expect(
      (await api.patch(`/tables/${table.id}/columns/${upper.id}/`, { formula: 'concat("x", {Name})' })).statusCode,
    ).toBe(200);
    // The pass wrote every cell although it logged none of them.
    const deep = (await api.get(`/tables/${table.id}/rows/?limit=1&offset=2499`)).json();
    expect(deep.rows[0].computed[upper.id]).toMatchObject({ state: 'done', value: 'xn2499' });
    expect((await api.patch(`/tables/${table.id}/columns/${name.id}/`, { name: 'Full name' })).statusCode).toBe(200);
    const row = (await api.post(`/tables/${table.id}/rows/`, { cells: { [name.id]: 'Zed' } })).json();
    expect((await api.del(`/tables/${table.id}/columns/${upper.id}/`)).statusCode).toBe(204);

    const events = await stream.until(
      (e) => e.event === 'columns_changed' && dataOf<{ change: string }>(e).change === 'deleted',
    );
    expect(plain(events)).toEqual([
      { event: 'columns_changed', data: { table_id: table.id, change: 'added', column_ids: [upper.id] } },
      // 2,500 cells written: one event, where each thousand cells used to be one.
      { event: 'column_recomputed', data: { table_id: table.id, column_id: upper.id } },
      { event: 'columns_changed', data: { table_id: table.id, change: 'updated', column_ids: [upper.id] } },
      { event: 'column_recomputed', data: { table_id: table.id, column_id: upper.id } },
      { event: 'columns_changed', data: { table_id: table.id, change: 'updated', column_ids: [name.id] } },
      { event: 'rows_added', data: { table_id: table.id, row_ids: [row.id] } },
      // A single row's formula cells are still listed cell by cell.
      {
        event: 'cells_updated',
        data: {
          table_id: table.id,
          cells: [{ row_id: row.id, column_id: upper.id, state: 'done', value: 'xZed', error: null, cost: 0 }],
        },
      },
      { event: 'columns_changed', data: { table_id: table.id, change: 'deleted', column_ids: [upper.id] } },
    ]);
  });

  it('gives a subscriber that reconnects with Last-Event-ID every change it missed, then carries on live', async () => {
    const table = await api.table({ name: 'Reconnect' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const witness = await ready(table.id);
    const client = await ready(table.id);
    expect(stack.app.tableEvents.streamCount(table.id)).toBe(2);

    const first = (await api.post(`/tables/${table.id}/rows/`, { cells: { [name.id]: 'first' } })).json();
    const seen = await client.stream.next();
    expect(dataOf(seen)).toEqual({ table_id: table.id, row_ids: [first.id] });
    client.stream.close();
    // The server lets go of a stream whose client left.
    await eventually(() => stack.app.tableEvents.streamCount(table.id) === 1);

    // While it is away: a bulk add, changes, a delete and an import.
    const bulk = (
      await api.post(`/tables/${table.id}/rows/bulk/`, {
        rows: [1, 2, 3].map((n) => ({ cells: { [name.id]: `bulk ${n}` } })),
      })
    ).json();
    await api.patch(`/tables/${table.id}/rows/${first.id}/`, { cells: { [name.id]: null } });
    await api.del(`/tables/${table.id}/rows/${bulk.results[1].id}/`);
    expect((await csv(table.id, 'Name\nx\ny\n')).statusCode).toBe(200);

    const witnessed = await witness.stream.until(
      (e) => e.event === 'rows_added' && dataOf<{ row_ids: string[] }>(e).row_ids.length === 2,
    );
    expect(witnessed.map((e) => e.event)).toEqual([
      'rows_added',
      'rows_added',
      'rows_updated',
      'rows_deleted',
      'rows_added',
    ]);
    expect(witnessed[0]!.id).toBe(seen.id);

    const back = await ready(table.id, seen.id);
    expect(back.id).toBe(Number(seen.id));
    const caughtUp = await take(back.stream, witnessed.length - 1);
    expect(caughtUp.map((e) => [e.id, e.event, e.data])).toEqual(
      witnessed.slice(1).map((e) => [e.id, e.event, e.data]),
    );

    const after = (await api.post(`/tables/${table.id}/rows/`, {})).json();
    for (const stream of [back.stream, witness.stream]) {
      expect(plain([await stream.next()])).toEqual([
        { event: 'rows_added', data: { table_id: table.id, row_ids: [after.id] } },
      ]);
    }
  });

  it('shows a subscriber of one table nothing of another', async () => {
    const one = await api.table({ name: 'One' });
    const other = await api.table({ name: 'Other' });
    const onOne = await ready(one.id);
    const onOther = await ready(other.id);

    const otherRow = (await api.post(`/tables/${other.id}/rows/`, {})).json();
    await api.post(`/tables/${other.id}/rows/bulk/`, { rows: [{ cells: {} }, { cells: {} }] });
    await api.del(`/tables/${other.id}/rows/${otherRow.id}/`);
    const oneRow = (await api.post(`/tables/${one.id}/rows/`, {})).json();
    const otherLast = (await api.post(`/tables/${other.id}/rows/`, {})).json();

    // Changes of the other table came first; were they leaking, they would arrive before this one.
    expect(plain([await onOne.stream.next()])).toEqual([
      { event: 'rows_added', data: { table_id: one.id, row_ids: [oneRow.id] } },
    ]);
    const otherEvents = await onOther.stream.until(
      (e) => dataOf<{ row_ids?: string[] }>(e).row_ids?.[0] === otherLast.id,
    );
    expect(otherEvents.map((e) => e.event)).toEqual(['rows_added', 'rows_added', 'rows_deleted', 'rows_added']);
    expect(otherEvents.every((e) => dataOf(e).table_id === other.id)).toBe(true);
  });

  it('delivers a bulk add of 1,000 rows and a 2,500-line import whole, each announced by one notification', async () => {
    const table = await api.table({ name: 'Bulk' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const { stream } = await ready(table.id);
    const listener = createSql(stack.databaseUrl, { max: 1 });
    try {
      const heard: string[] = [];
      await listener.listen('table_changes', (payload) => heard.push(payload));
      // Notifications reach a listener in commit order: once this one is heard, the writes' are too.
      const heardUpTo = async (marker: string) => {
        await stack.sql`select pg_notify('table_changes', ${marker})`;
        await eventually(() => heard.includes(marker));
        return heard.splice(0).filter((p) => p === table.id).length;
      };

      const bulk = (
        await api.post(`/tables/${table.id}/rows/bulk/`, {
          rows: Array.from({ length: 1000 }, (_, n) => ({ cells: { [name.id]: `row ${n}` } })),
        })
      ).json();
      expect(bulk.succeeded).toBe(1000);
      expect(await heardUpTo('after bulk')).toBe(1);
      const bulkIds = bulk.results.map((r: { id: string }) => r.id);

      const lines = Array.from({ length: 2500 }, (_, n) => `line ${n}`);
      const report = (await csv(table.id, `Name\n${lines.join('\n')}\n`)).json();
      expect(report.rows_added).toBe(2500);
      expect(await heardUpTo('after import')).toBe(1);

      const delivered: string[] = [];
      const events = await stream.until((e) => {
        delivered.push(...dataOf<{ row_ids: string[] }>(e).row_ids);
        return delivered.length >= 3500;
      });
      expect(events.every((e) => e.event === 'rows_added')).toBe(true);
      expect(delivered.slice(0, 1000)).toEqual(bulkIds);
      expect(new Set(delivered).size).toBe(3500);
      // The grid's order: the import's rows follow the bulk's, in file order.
      const grid = (await api.get(`/tables/${table.id}/rows/?limit=1000&offset=1000`)).json().rows as { id: string }[];
      expect(delivered.slice(1000, 2000)).toEqual(grid.map((r) => r.id));
    } finally {
      await listener.end();
    }
  });

  it('answers reset to a Last-Event-ID whose changes are past the retention window, and to one it never gave', async () => {
    const table = await api.table({ name: 'Retention' });
    const old = (await api.post(`/tables/${table.id}/rows/`, {})).json();
    const [change] = await stack.sql<{ id: number }[]>`select id from table_changes where table_id = ${table.id}`;
    const oldId = change!.id;
    await stack.sql`update table_changes set created_at = now() - interval '25 hours' where table_id = ${table.id}`;
    const recent = (await api.post(`/tables/${table.id}/rows/`, {})).json();
    expect(await pruneTableChanges(stack.sql, 24)).toBe(1);

    const stale = await subscribe(table.id, { lastEventId: oldId - 1 });
    const reset = await stale.next();
    expect({ event: reset.event, data: dataOf(reset) }).toEqual({
      event: 'reset',
      data: { table_id: table.id, reason: 'expired' },
    });
    // It continues from the table as it is now: the next event is a new change, not the recent one.
    const fresh = (await api.post(`/tables/${table.id}/rows/`, {})).json();
    expect(dataOf(await stale.next())).toEqual({ table_id: table.id, row_ids: [fresh.id] });

    // The pruned change itself was seen: everything after it is still there.
    const inWindow = await ready(table.id, oldId);
    expect(dataOf(await inWindow.stream.next())).toEqual({ table_id: table.id, row_ids: [recent.id] });
    expect(dataOf(await inWindow.stream.next())).toEqual({ table_id: table.id, row_ids: [fresh.id] });
    expect(old.id).not.toBe(recent.id);

    const unknown = await subscribe(table.id, { lastEventId: 999_999_999_999 });
    const answer = await unknown.next();
    expect({ event: answer.event, data: dataOf(answer) }).toEqual({
      event: 'reset',
      data: { table_id: table.id, reason: 'unknown' },
    });
  });

  it('orders the changes of concurrent writers of a table by commit, so a live subscriber skips none', async () => {
    const table = await api.table({ name: 'Concurrent' });
    const { stream } = await ready(table.id);
    let release!: () => void;
    let inserted!: () => void;
    const hasInserted = new Promise<void>((resolve) => (inserted = resolve));
    // A slow writer: its change is logged (an id drawn) but not committed yet.
    const slow = stack.sql.begin(async (tx) => {
      const [row] = await tx<
        { id: string }[]
      >`insert into table_rows (workspace_id, table_id) values (${paid.workspaceId}, ${table.id}) returning id`;
      inserted();
      await new Promise<void>((resolve) => (release = resolve));
      return row!.id;
    });
    await hasInserted;
    const fast = api.post(`/tables/${table.id}/rows/`, {});
    // Had the fast writer committed first with the larger id, a subscriber that read it would never look back.
    const waitsForSlow = async () => {
      for (;;) {
        const [w] = await stack.sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'advisory'`;
        if (w!.n > 0) return 'waited';
        await sleep(20);
      }
    };
    expect(await Promise.race([fast.then(() => 'committed first'), waitsForSlow()])).toBe('waited');
    release();
    const slowId = await slow;
    const fastId = (await fast).json().id;
    const sentinel = (await api.post(`/tables/${table.id}/rows/`, {})).json().id;
    const events = await stream.until((e) => dataOf<{ row_ids: string[] }>(e).row_ids[0] === sentinel);
    expect(events.map((e) => dataOf<{ row_ids: string[] }>(e).row_ids[0])).toEqual([slowId, fastId, sentinel]);
  });

  it('answers HEAD without leaving a stream behind', async () => {
    const table = await api.table({ name: 'Head' });
    const res = await request(`${base}/tables/${table.id}/events/`, { method: 'HEAD', headers: withKey(paid.apiKey) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    await res.body.dump();
    await eventually(() => stack.app.tableEvents.streamCount(table.id) === 0);
  });

  it('lets a stream nobody reads fall behind without holding its changes, then gives it every one', async () => {
    const table = await api.table({ name: 'Slow reader' });
    // A hub of its own that keeps only three changes per table and reads two at a time.
    const hub = new TableEventHub(stack.sql, stack.app.log, { pageSize: 2, keptMax: 3 });
    const stop = new AbortController();
    try {
      const reader = (await hub.open(table.id, { once: false, signal: stop.signal }))[Symbol.asyncIterator]();
      const idle = await hub.open(table.id, { once: false, signal: stop.signal });
      const frame = async () => String((await reader.next()).value);
      expect(await frame()).toContain('event: ready');
      const added: string[] = [];
      for (let n = 0; n < 8; n += 1) {
        added.push((await api.post(`/tables/${table.id}/rows/`, {})).json().id);
        expect(await frame()).toContain(added[n]);
      }
      // The idle stream holds at most one event, however far behind it is: the rest stays in the log.
      expect(idle.readableLength).toBeLessThanOrEqual(1);
      const late: string[] = [];
      for await (const chunk of idle) {
        const text = String(chunk);
        if (text.includes('event: rows_added'))
          late.push(JSON.parse(text.slice(text.indexOf('data: ') + 6)).row_ids[0]);
        if (late.length === added.length) break;
      }
      expect(late).toEqual(added);
    } finally {
      stop.abort();
      await hub.close();
    }
  });

  it('with once=true sends what is already there and ends the stream', async () => {
    const table = await api.table({ name: 'Once' });
    const { id: start } = await ready(table.id);
    const rows = (await api.post(`/tables/${table.id}/rows/bulk/`, { rows: [{ cells: {} }, { cells: {} }] })).json();
    await api.del(`/tables/${table.id}/rows/${rows.results[0].id}/`);

    const polled = await subscribe(table.id, { lastEventId: start, once: true });
    const events = await polled.rest();
    expect(events.map((e) => e.event)).toEqual(['ready', 'rows_added', 'rows_deleted']);
    expect(events[0]!.id).toBe(String(start));

    const nothingNew = await subscribe(table.id, { lastEventId: events[2]!.id, once: true });
    expect((await nothingNew.rest()).map((e) => e.event)).toEqual(['ready']);
  });

  it('keeps delivering after its LISTEN connection is cut', async () => {
    const table = await api.table({ name: 'Cut' });
    const { stream } = await ready(table.id);
    const cut = await stack.sql`
      select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'`;
    expect(cut.length).toBeGreaterThan(0);
    const row = (await api.post(`/tables/${table.id}/rows/`, {})).json();
    expect(dataOf(await stream.next())).toEqual({ table_id: table.id, row_ids: [row.id] });
  });

  it('is refused like every table route: no credential 401, a bad Last-Event-ID 422, another workspace’s table 404', async () => {
    const table = await api.table({ name: 'Guarded' });
    const url = `/tables/${table.id}/events/?once=true`;
    expect((await stack.app.inject({ method: 'GET', url })).statusCode).toBe(401);
    const bad = await stack.app.inject({
      method: 'GET',
      url,
      headers: { ...withKey(paid.apiKey), 'last-event-id': 'abc' },
    });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().issues[0].loc).toEqual(['header', 'last-event-id']);
    const intruder = await stack.createWorkspace('paid');
    const foreign = await stack.app.inject({ method: 'GET', url, headers: withKey(intruder.apiKey) });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toEqual({ detail: expect.any(String) });
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: '/tables/00000000-0000-4000-8000-000000000000/events/',
          headers: withKey(paid.apiKey),
        })
      ).statusCode,
    ).toBe(404);
  });
});
