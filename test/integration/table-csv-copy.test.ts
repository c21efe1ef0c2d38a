/**
 * The CSV import's path through `COPY` (store/tables/row-load.ts): values that COPY's text format
 * escapes land exactly as read, what COPY cannot carry is still refused by line, formula cells
 * are written for the imported rows across the load's batches, and a load refused part-way
 * writes nothing.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

function upload(tableId: string, body: string | Buffer | Readable) {
  return stack.app.inject({
    method: 'POST',
    url: `/tables/${tableId}/csv/`,
    headers: { ...withKey(paid.apiKey), 'content-type': 'text/csv' },
    payload: body,
  });
}

const quoted = (value: string) => `"${value.replace(/"/g, '""')}"`;

describe('CSV import through COPY', () => {
  it('lands tabs, backslashes, quotes, line breaks and COPY markers exactly as read, and exports them back', async () => {
    const values = [
      'tab\there',
      'back\\slash',
      '\\N',
      '\\.',
      'ends with \\',
      'quote " and ""two""',
      'line\nbreak and \\n',
      'carriage\r\nreturn',
      '\\t\t\\\\',
      'ünïcødé ✓ 🚀',
      ' spaced ',
    ];
    const table = await api.table({ name: 'Escapes' });
    const body = `Id,Value\n${values.map((v, i) => `${i},${quoted(v)}`).join('\n')}\n`;
    const res = await upload(table.id, body);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ rows_added: values.length, rejected_count: 0 });

    const columns = (await api.get(`/tables/${table.id}/columns/`)).json().columns as { id: string; name: string }[];
    const valueId = columns.find((c) => c.name === 'Value')!.id;
    const rows = (await api.get(`/tables/${table.id}/rows/?limit=100`)).json().rows as {
      cells: Record<string, unknown>;
    }[];
    // A CR LF inside a quoted field is read as a line break, as every line ending is.
    expect(rows.map((r) => r.cells[valueId])).toEqual(values.map((v) => v.replace(/\r\n/g, '\n')));

    const exported = (await api.get(`/tables/${table.id}/csv/`)).body;
    const again = await api.table({ name: 'Escapes again' });
    expect((await upload(again.id, exported)).json()).toMatchObject({ rows_added: values.length });
    expect((await api.get(`/tables/${again.id}/csv/`)).body).toBe(exported);
  });

  it('refuses a NUL with its line while the lines around it land, and keeps empty fields as empty cells', async () => {
    const table = await api.table({ name: 'Nul' });
    const res = await upload(table.id, 'A,B\n1,x\n2,\u0000y\n3,\n,\n4,z\n');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      rows_added: 4,
      rejected_count: 1,
      rejected: [{ line: 3, reason: 'The field under "B" contains a NUL character.' }],
    });
    const columns = (await api.get(`/tables/${table.id}/columns/`)).json().columns as { id: string; name: string }[];
    const [a, b] = ['A', 'B'].map((n) => columns.find((c) => c.name === n)!.id);
    const rows = (await api.get(`/tables/${table.id}/rows/?limit=100`)).json().rows as {
      cells: Record<string, unknown>;
    }[];
    expect(rows.map((r) => r.cells)).toEqual([{ [a!]: '1', [b!]: 'x' }, { [a!]: '3' }, {}, { [a!]: '4', [b!]: 'z' }]);
    expect((await api.get(`/tables/${table.id}/`)).json().row_count).toBe(4);
  });

  it('writes the formula cells of every imported row, in more than one batch, and counts the rows', async () => {
    const table = await api.table({ name: 'Formulas' });
    const name = await api.column(table.id, { kind: 'input', name: 'Name' });
    const upper = await api.column(table.id, { kind: 'formula', name: 'Upper', formula: 'upper({Name})' });
    const count = 12_345;
    const res = await upload(
      table.id,
      `Skipped,Name\n${Array.from({ length: count }, (_, i) => `s,n${i}`).join('\n')}\n`,
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ rows_added: count });
    expect((await api.get(`/tables/${table.id}/`)).json().row_count).toBe(count);
    for (const offset of [0, 4999, 5000, count - 1]) {
      const [row] = (await api.get(`/tables/${table.id}/rows/?limit=1&offset=${offset}`)).json().rows;
      expect(row.cells[name.id]).toBe(`n${offset}`);
      expect(row.computed[upper.id]).toMatchObject({ state: 'done', value: `N${offset}` });
    }
    const [cells] = await stack.sql<{ n: number }[]>`
      select count(*)::int as n from table_cells where column_id = ${upper.id} and state = 'done'`;
    expect(cells!.n).toBe(count);
  });

  it('writes nothing when the upload breaks off after rows were sent to Postgres', async () => {
    const table = await api.table({ name: 'Cut off' });
    const address = new URL(await stack.app.listen({ port: 0, host: '127.0.0.1' }));
    let socket: Socket | undefined;
    try {
      const copying = () => stack.sql<{ state: string }[]>`
        select state from pg_stat_activity where query like 'copy table_rows %' and state <> 'idle'`;
      socket = connect(Number(address.port), address.hostname);
      await once(socket, 'connect');
      socket.write(
        `POST /tables/${table.id}/csv/ HTTP/1.1\r\nhost: ${address.host}\r\nx-api-key: ${paid.apiKey}\r\n` +
          `content-type: text/csv\r\ncontent-length: 10000000\r\n\r\nA,B\n`,
      );
      // Well past one COPY chunk, then the client goes away with the rest unsent.
      for (let i = 0; i < 5; i += 1) socket.write(`${'x'.repeat(100)},y\n`.repeat(1000));
      for (let i = 0; (await copying()).length === 0; i += 1) {
        expect(i, 'the COPY never started').toBeLessThan(200);
        await sleep(25);
      }
      socket.destroy();
      for (let i = 0; (await copying()).length > 0; i += 1) {
        expect(i, 'the COPY never ended').toBeLessThan(400);
        await sleep(25);
      }
      await sleep(100);
    } finally {
      socket?.destroy();
      stack.app.server.close();
    }
    expect((await api.get(`/tables/${table.id}/`)).json().row_count).toBe(0);
    expect((await api.get(`/tables/${table.id}/columns/`)).json().columns).toEqual([]);
    const [rows] = await stack.sql<
      { n: number }[]
    >`select count(*)::int as n from table_rows where table_id = ${table.id}`;
    expect(rows!.n).toBe(0);
    // The connection that held the aborted COPY serves the next imports.
    for (let i = 0; i < 3; i += 1)
      expect((await upload(table.id, 'A,B\n1,2\n')).json()).toMatchObject({ rows_added: 1 });
    expect((await api.get(`/tables/${table.id}/`)).json().row_count).toBe(3);
  });
});
