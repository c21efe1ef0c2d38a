/**
 * Folders replace tags (migration 008): a database migrated up to 007 holds tables in their tag-era
 * shape; applying 008 files each one-tag table into a folder of that name and leaves the others
 * unfiled with their former tags, which listUnfiledTables lists until they are moved.
 */
import { Client, Connection } from '@temporalio/client';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { migrate } from '../../db/migrate.js';
import { createSql, type Sql } from '../../db/sql.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import { randomUUID } from 'node:crypto';
import { createApiKey } from '../../store/platform/api-keys.js';
import { addMember } from '../../store/platform/workspaces.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { withKey } from '../support/test-stack.js';
import { testIntegrations } from '../support/integrations.js';

const adminUrl = inject('pgAdminUrl');
const name = `t_mig_${randomBytes(6).toString('hex')}`;
let admin: Sql;
let sql: Sql;
let connection: Connection;
let app: FastifyInstance;
const ws: Record<'a' | 'b', { id: string; key: string; api: TablesClient }> = {} as never;
const tables: Record<string, string> = {};

beforeAll(async () => {
  admin = createSql(adminUrl, { max: 1 });
  await admin`create database ${admin(name)}`;
  sql = createSql(adminUrl.replace(/\/postgres$/, `/${name}`), { max: 5 });
  await migrate(sql, { before: '009' });

  // Workspaces as a database at 008 held them (today's createWorkspace also opens a billing
  // account, a table of migration 031; that migration opens one for each workspace it finds).
  for (const label of ['a', 'b'] as const) {
    const [workspace] = await sql<
      { id: string }[]
    >`insert into workspaces (name, plan) values (${`Workspace ${label}`}, 'paid') returning id`;
    await sql`insert into credit_balances (workspace_id) values (${workspace!.id})`;
    const member = await addMember(sql, {
      workspaceId: workspace!.id,
      idpUserId: randomUUID(),
      displayName: 'Admin',
      email: `admin-${label}@example.com`,
      role: 'admin',
    });
    const key = await createApiKey(sql, {
      workspaceId: workspace!.id,
      createdBy: member.id,
      name: 'Admin key',
      scope: 'write',
      expireAt: null,
    });
    ws[label] = { id: workspace!.id, key: key.key, api: undefined as never };
  }
  const tagged: [string, 'a' | 'b', string[]][] = [
    ['one tag', 'a', ['Leads']],
    ['same tag, other case', 'a', ['leads']],
    ['repeated tag', 'a', ['Partners', 'Partners', ' ']],
    ['two tags', 'a', ['Leads', 'Partners']],
    ['three tags', 'a', ['Q3', 'EMEA', 'Hot']],
    ['no tags', 'a', []],
    ['padded tag', 'a', ['  Customers  ']],
    ['other workspace', 'b', ['Leads']],
    ['other workspace, two tags', 'b', ['x', 'y']],
  ];
  for (const [tableName, label, tags] of tagged) {
    const [row] = await sql<{ id: string }[]>`
      insert into tables (workspace_id, name, tags) values (${ws[label].id}, ${tableName}, ${tags}) returning id`;
    tables[tableName] = row!.id;
  }

  expect(await migrate(sql)).toContain('009_table_folders.sql');

  connection = await Connection.connect({ address: inject('temporalAddress') });
  app = await buildApp({
    sql,
    temporal: { client: new Client({ connection }), taskQueue: 'tables-migration-unused' },
    verifyToken: createTokenVerifier(await resolveTokenConfig(sql, {})),
    rateLimit: { limit: 0, windowSeconds: 60 },
    integrations: testIntegrations(),
  });
  await app.ready();
  const stack = { app } as never;
  ws.a.api = tablesClient(stack, withKey(ws.a.key));
  ws.b.api = tablesClient(stack, withKey(ws.b.key));
});

afterAll(async () => {
  await app?.close();
  await connection?.close();
  await sql?.end({ timeout: 5 });
  await admin`drop database if exists ${admin(name)} with (force)`;
  await admin.end();
});

const read = async (api: TablesClient, id: string) => (await api.get(`/tables/${id}/`)).json();

describe('folders replace tags (migration 008)', () => {
  it('files each table that had one tag into a top-level folder of that name, one folder per name', async () => {
    const folders = (await ws.a.api.get('/table-folders/')).json().folders;
    expect(folders.map((f: { name: string; parent_id: string | null }) => [f.name, f.parent_id])).toEqual([
      ['Customers', null],
      ['Leads', null],
      ['Partners', null],
    ]);
    const leads = folders.find((f: { name: string }) => f.name === 'Leads');
    expect(leads.table_count).toBe(2);
    for (const tableName of ['one tag', 'same tag, other case']) {
      expect(await read(ws.a.api, tables[tableName]!)).toMatchObject({
        folder_id: leads.id,
        folder_path: [{ id: leads.id, name: 'Leads' }],
        former_tags: [tableName === 'one tag' ? 'Leads' : 'leads'],
      });
    }
    // A tag given twice, or with a blank beside it, is still one tag.
    expect(await read(ws.a.api, tables['repeated tag']!)).toMatchObject({
      folder_path: [{ name: 'Partners' }],
      former_tags: ['Partners'],
    });
    expect(await read(ws.a.api, tables['padded tag']!)).toMatchObject({
      folder_path: [{ name: 'Customers' }],
      former_tags: ['Customers'],
    });
    expect(await read(ws.a.api, tables['no tags']!)).toMatchObject({
      folder_id: null,
      folder_path: [],
      former_tags: [],
    });
  });

  it('keeps workspaces apart: each gets its own folders', async () => {
    const folders = (await ws.b.api.get('/table-folders/')).json().folders;
    expect(folders.map((f: { name: string }) => f.name)).toEqual(['Leads']);
    expect((await read(ws.b.api, tables['other workspace']!)).folder_id).toBe(folders[0].id);
  });

  it('lists exactly the tables with more than one tag at /tables/unfiled/, each with its former tags', async () => {
    const res = await ws.a.api.get('/tables/unfiled/');
    expect(res.statusCode).toBe(200);
    expect(
      res
        .json()
        .tables.map((t: { name: string; former_tags: string[]; folder_id: string | null }) => [
          t.name,
          t.former_tags,
          t.folder_id,
        ]),
    ).toEqual([
      ['three tags', ['Q3', 'EMEA', 'Hot'], null],
      ['two tags', ['Leads', 'Partners'], null],
    ]);
    expect((await ws.b.api.get('/tables/unfiled/')).json().tables.map((t: { name: string }) => t.name)).toEqual([
      'other workspace, two tags',
    ]);
  });

  it('files a table by moving it anywhere, the top level included; other changes do not', async () => {
    const twoTags = tables['two tags']!;
    const threeTags = tables['three tags']!;
    await ws.a.api.patch(`/tables/${twoTags}/`, { name: 'two tags, renamed', is_favorite: true, archived: true });
    expect((await ws.a.api.get('/tables/unfiled/')).json().tables).toHaveLength(2);

    // Already at the top level: moving it there files it all the same.
    const moved = await ws.a.api.patch(`/tables/${twoTags}/`, { folder_id: null });
    expect(moved.json()).toMatchObject({ folder_id: null, former_tags: ['Leads', 'Partners'] });
    expect((await ws.a.api.get('/tables/unfiled/')).json().tables.map((t: { id: string }) => t.id)).toEqual([
      threeTags,
    ]);

    const folder = (await ws.a.api.post('/table-folders/', { name: 'Regions' })).json();
    await ws.a.api.patch(`/tables/${threeTags}/`, { folder_id: folder.id });
    expect((await ws.a.api.get('/tables/unfiled/')).json().tables).toEqual([]);
    // Moving it back out does not make it unfiled again.
    await ws.a.api.patch(`/tables/${threeTags}/`, { folder_id: null });
    expect((await ws.a.api.get('/tables/unfiled/')).json().tables).toEqual([]);
  });

  it('leaves a deleted unfiled table out of /tables/unfiled/ until it is restored', async () => {
    const id = tables['other workspace, two tags']!;
    await ws.b.api.del(`/tables/${id}/`);
    expect((await ws.b.api.get('/tables/unfiled/')).json().tables).toEqual([]);
    await ws.b.api.post(`/tables/${id}/restore/`);
    expect((await ws.b.api.get('/tables/unfiled/')).json().tables.map((t: { id: string }) => t.id)).toEqual([id]);
  });

  it('drops the tags column once they are folders', async () => {
    const columns = await sql<{ column_name: string }[]>`
      select column_name from information_schema.columns where table_name = 'tables' and column_name in ('tags', 'former_tags', 'needs_filing')`;
    expect(columns.map((c) => c.column_name).sort()).toEqual(['former_tags', 'needs_filing']);
  });
});
