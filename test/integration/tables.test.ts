import { beforeAll, describe, expect, it } from 'vitest';
import { folderDepthMax } from '../../domain/tables/tables.js';
import { tablesClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

const name255 = 'n'.repeat(255);

describe('tables (interface spec: Table summary)', () => {
  it('creates a table with every field of the summary, owned by the caller', async () => {
    const res = await api.post('/tables/', { name: 'Leads', description: 'Inbound from the site' });
    expect(res.statusCode).toBe(201);
    const table = res.json();
    expect(table).toEqual({
      id: expect.any(String),
      name: 'Leads',
      description: 'Inbound from the site',
      auto_run: false,
      keep_existing_results: true,
      row_count: 0,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      ai_made: false,
      archived_at: null,
      deleted_at: null,
      folder_id: null,
      folder_path: [],
      former_tags: [],
      is_favorite: false,
      last_viewed_at: null,
      owner_display_name: expect.any(String),
      owner_user_id: paid.userId,
      shared_as_template: false,
    });
    expect((await api.get(`/tables/${table.id}/`)).json()).toEqual(table);

    const flags = await api.table({
      name: 'Made by the assistant',
      ai_made: true,
      auto_run: true,
      keep_existing_results: false,
      shared_as_template: true,
    });
    expect(flags).toMatchObject({
      ai_made: true,
      auto_run: true,
      keep_existing_results: false,
      shared_as_template: true,
    });
  });

  it('bounds the name at 1 to 255 characters and the description at 2000', async () => {
    expect((await api.post('/tables/', { name: name255 })).statusCode).toBe(201);
    const long = await api.post('/tables/', { name: `${name255}x` });
    expect(long.statusCode).toBe(422);
    expect(long.json().issues[0].loc).toEqual(['body', 'name']);
    expect((await api.post('/tables/', { name: '' })).statusCode).toBe(422);
    expect((await api.post('/tables/', { name: 'Tab\there' })).statusCode).toBe(422);
    expect((await api.post('/tables/', { name: 'D', description: 'd'.repeat(2000) })).statusCode).toBe(201);
    const longDescription = await api.post('/tables/', { name: 'D', description: 'd'.repeat(2001) });
    expect(longDescription.statusCode).toBe(422);
    expect(longDescription.json().issues[0].loc).toEqual(['body', 'description']);
    expect((await api.post('/tables/', { name: 'D', description: 'nul\u0000' })).statusCode).toBe(422);
  });

  it('renames, describes, archives, changes run settings and hands a table to another member', async () => {
    const table = await api.table({ name: 'Before', description: 'old' });
    const colleague = await stack.addMember(paid.workspaceId, 'member');
    const res = await api.patch(`/tables/${table.id}/`, {
      name: 'After',
      description: null,
      auto_run: true,
      keep_existing_results: false,
      shared_as_template: true,
      owner_user_id: colleague.userId,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      name: 'After',
      description: null,
      auto_run: true,
      keep_existing_results: false,
      shared_as_template: true,
      owner_user_id: colleague.userId,
      owner_display_name: expect.stringMatching(/^member/),
    });
    expect(res.json().updated_at > (table.updated_at as string)).toBe(true);

    const archived = (await api.patch(`/tables/${table.id}/`, { archived: true })).json();
    expect(archived.archived_at).toEqual(expect.any(String));
    // Archiving again keeps the first time; a field left out keeps its value.
    expect((await api.patch(`/tables/${table.id}/`, { archived: true })).json().archived_at).toBe(archived.archived_at);
    expect((await api.patch(`/tables/${table.id}/`, { archived: false })).json()).toMatchObject({
      archived_at: null,
      name: 'After',
      auto_run: true,
    });

    const stranger = await api.patch(`/tables/${table.id}/`, { owner_user_id: 'nobody-here' });
    expect(stranger.statusCode).toBe(404);
  });

  it('keeps favourites and last views per person', async () => {
    const table = await api.table({ name: 'Shared' });
    const colleague = await stack.addMember(paid.workspaceId, 'member');
    const theirs = tablesClient(stack, withToken(colleague.accessToken));

    expect((await api.patch(`/tables/${table.id}/`, { is_favorite: true })).json().is_favorite).toBe(true);
    expect((await theirs.get(`/tables/${table.id}/`)).json().is_favorite).toBe(false);

    const viewed = await theirs.post(`/tables/${table.id}/viewed/`);
    expect(viewed.statusCode).toBe(200);
    expect(viewed.json().last_viewed_at).toEqual(expect.any(String));
    expect((await api.get(`/tables/${table.id}/`)).json().last_viewed_at).toBeNull();
    // Viewing keeps the favourite; unfavouriting keeps the view.
    await api.post(`/tables/${table.id}/viewed/`);
    const mine = (await api.patch(`/tables/${table.id}/`, { is_favorite: false })).json();
    expect(mine).toMatchObject({ is_favorite: false, last_viewed_at: expect.any(String) });

    const favourites = (await api.get('/tables/?favorite=true')).json().tables.map((t: { id: string }) => t.id);
    expect(favourites).not.toContain(table.id);
    await theirs.patch(`/tables/${table.id}/`, { is_favorite: true });
    expect((await theirs.get('/tables/?favorite=true')).json().tables.map((t: { id: string }) => t.id)).toContain(
      table.id,
    );
  });

  it('refuses favourites and views for an API key with no member behind it', async () => {
    const table = await api.table({ name: 'Orphan' });
    const key = (await api.post('/api-keys/', { name: `orphan ${table.id}` })).json();
    await stack.sql`update api_keys set created_by = null where id = ${key.id}`;
    const orphan = tablesClient(stack, withKey(key.key));
    expect((await orphan.get(`/tables/${table.id}/`)).json()).toMatchObject({
      is_favorite: false,
      last_viewed_at: null,
    });
    expect((await orphan.patch(`/tables/${table.id}/`, { is_favorite: true })).statusCode).toBe(409);
    expect((await orphan.post(`/tables/${table.id}/viewed/`)).statusCode).toBe(409);
    expect((await orphan.patch(`/tables/${table.id}/`, { name: 'Still works' })).statusCode).toBe(200);
  });

  it('deletes softly: 404 after, listed in the trash, restored, and its rows unreachable meanwhile', async () => {
    const table = await api.table({ name: 'To the trash' });
    expect((await api.del(`/tables/${table.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/tables/${table.id}/`)).statusCode).toBe(404);
    expect((await api.del(`/tables/${table.id}/`)).statusCode).toBe(404);
    expect((await api.get(`/tables/${table.id}/rows/`)).statusCode).toBe(404);
    expect((await api.patch(`/tables/${table.id}/`, { name: 'x' })).statusCode).toBe(404);
    const trash = (await api.get('/tables/?deleted=true&limit=200')).json().tables;
    expect(trash.find((t: { id: string }) => t.id === table.id)).toMatchObject({ deleted_at: expect.any(String) });
    expect((await api.get('/tables/?limit=200')).json().tables.map((t: { id: string }) => t.id)).not.toContain(
      table.id,
    );

    const restored = await api.post(`/tables/${table.id}/restore/`);
    expect(restored.statusCode).toBe(200);
    expect(restored.json()).toMatchObject({ id: table.id, deleted_at: null });
    expect((await api.post(`/tables/${table.id}/restore/`)).statusCode).toBe(409);
  });

  it('lists by folder, top level, archived state, in the asked order, a page at a time', async () => {
    const { workspaceId, apiKey } = await stack.createWorkspace('paid');
    void workspaceId;
    const own = tablesClient(stack, withKey(apiKey));
    const folder = (await own.post('/table-folders/', { name: 'Q3' })).json();
    const b = await own.table({ name: 'b table', folder_id: folder.id });
    const a = await own.table({ name: 'A table' });
    const c = await own.table({ name: 'c table' });
    await own.patch(`/tables/${c.id}/`, { archived: true });
    const ids = async (query: string) =>
      (await own.get(`/tables/?${query}`)).json().tables.map((t: { id: string }) => t.id);

    expect(await ids('order=name')).toEqual([a.id, b.id]);
    expect(await ids('order=name&archived=include')).toEqual([a.id, b.id, c.id]);
    expect(await ids('archived=only')).toEqual([c.id]);
    expect(await ids(`folder_id=${folder.id}`)).toEqual([b.id]);
    expect(await ids('top_level=true&order=name')).toEqual([a.id]);
    expect(await ids('order=created')).toEqual([a.id, b.id]);
    const page = (await own.get('/tables/?order=name&archived=include&limit=1&offset=1')).json();
    expect(page).toMatchObject({
      total_count: 3,
      tables: [{ id: b.id, folder_path: [{ id: folder.id, name: 'Q3' }] }],
    });
    await own.post(`/tables/${b.id}/viewed/`);
    expect((await ids('order=recent'))[0]).toBe(b.id);

    for (const [query, status] of [
      ['limit=200', 200],
      ['limit=201', 422],
      ['limit=0', 422],
      ['offset=-1', 422],
      ['order=size', 422],
    ] as const) {
      expect({ query, status: (await own.get(`/tables/?${query}`)).statusCode }).toEqual({ query, status });
    }
    expect(
      (await own.post('/tables/', { name: 'x', folder_id: '00000000-0000-4000-8000-000000000000' })).statusCode,
    ).toBe(404);
  });
});

describe('folders', () => {
  it('nests folders and gives each table its path from the top level', async () => {
    const top = (await api.post('/table-folders/', { name: 'Sales' })).json();
    const mid = (await api.post('/table-folders/', { name: 'EMEA', parent_id: top.id })).json();
    expect(mid).toMatchObject({
      parent_id: top.id,
      folder_path: [
        { id: top.id, name: 'Sales' },
        { id: mid.id, name: 'EMEA' },
      ],
      table_count: 0,
    });
    const table = await api.table({ name: 'Germany', folder_id: mid.id });
    expect(table.folder_path).toEqual([
      { id: top.id, name: 'Sales' },
      { id: mid.id, name: 'EMEA' },
    ]);
    expect((await api.get(`/table-folders/${mid.id}/`)).json().table_count).toBe(1);

    // Renaming a folder shows in every path below it.
    await api.patch(`/table-folders/${top.id}/`, { name: 'Revenue' });
    expect((await api.get(`/tables/${table.id}/`)).json().folder_path[0]).toEqual({ id: top.id, name: 'Revenue' });
    const listed = (await api.get('/table-folders/')).json().folders.map((f: { id: string }) => f.id);
    expect(listed.indexOf(top.id)).toBeLessThan(listed.indexOf(mid.id));

    // Moving a table: into another folder, then to the top level.
    expect((await api.patch(`/tables/${table.id}/`, { folder_id: top.id })).json()).toMatchObject({
      folder_id: top.id,
      folder_path: [{ id: top.id }],
    });
    expect((await api.patch(`/tables/${table.id}/`, { folder_id: null })).json()).toMatchObject({
      folder_id: null,
      folder_path: [],
    });
    expect(
      (await api.patch(`/tables/${table.id}/`, { folder_id: '00000000-0000-4000-8000-000000000000' })).statusCode,
    ).toBe(404);
  });

  it('refuses a sibling of the same name (case ignored), but not the same name elsewhere', async () => {
    const parent = (await api.post('/table-folders/', { name: 'Parent' })).json();
    expect((await api.post('/table-folders/', { name: 'Leads', parent_id: parent.id })).statusCode).toBe(201);
    expect((await api.post('/table-folders/', { name: 'leads', parent_id: parent.id })).statusCode).toBe(409);
    expect((await api.post('/table-folders/', { name: 'Leads' })).statusCode).toBe(201);
    expect((await api.post('/table-folders/', { name: 'LEADS' })).statusCode).toBe(409);
    expect((await api.post('/table-folders/', { name: name255 })).statusCode).toBe(201);
    expect((await api.post('/table-folders/', { name: `${name255}x` })).statusCode).toBe(422);
    expect((await api.post('/table-folders/', { name: '' })).statusCode).toBe(422);
    expect(
      (await api.post('/table-folders/', { name: 'x', parent_id: '00000000-0000-4000-8000-000000000000' })).statusCode,
    ).toBe(404);
  });

  it(`nests at most ${folderDepthMax} deep and never into itself`, async () => {
    const chain: string[] = [];
    for (let depth = 1; depth <= folderDepthMax; depth += 1) {
      const res = await api.post('/table-folders/', { name: `Level ${depth}`, parent_id: chain.at(-1) ?? null });
      expect(res.statusCode).toBe(201);
      chain.push(res.json().id);
    }
    expect((await api.get(`/table-folders/${chain.at(-1)}/`)).json().folder_path).toHaveLength(folderDepthMax);
    expect((await api.post('/table-folders/', { name: 'Too deep', parent_id: chain.at(-1) })).statusCode).toBe(409);

    expect((await api.patch(`/table-folders/${chain[0]}/`, { parent_id: chain[3] })).statusCode).toBe(409);
    expect((await api.patch(`/table-folders/${chain[2]}/`, { parent_id: chain[2] })).statusCode).toBe(409);
    // A two-level subtree fits under a folder at depth 8, not under one at depth 9.
    const twoLevels = (await api.post('/table-folders/', { name: 'Two' })).json();
    await api.post('/table-folders/', { name: 'Below', parent_id: twoLevels.id });
    expect(
      (await api.patch(`/table-folders/${twoLevels.id}/`, { parent_id: chain[folderDepthMax - 2] })).statusCode,
    ).toBe(409);
    expect(
      (await api.patch(`/table-folders/${twoLevels.id}/`, { parent_id: chain[folderDepthMax - 3] })).statusCode,
    ).toBe(200);
    expect((await api.patch(`/table-folders/${twoLevels.id}/`, { parent_id: null })).json()).toMatchObject({
      parent_id: null,
      folder_path: [{ id: twoLevels.id }],
    });
  });

  it('deletes only an empty folder; a trashed table in it comes back at the top level', async () => {
    const folder = (await api.post('/table-folders/', { name: 'Temporary' })).json();
    const child = (await api.post('/table-folders/', { name: 'Child', parent_id: folder.id })).json();
    const table = await api.table({ name: 'Inside', folder_id: folder.id });
    expect((await api.del(`/table-folders/${folder.id}/`)).statusCode).toBe(409);
    await api.del(`/table-folders/${child.id}/`);
    expect((await api.del(`/table-folders/${folder.id}/`)).statusCode).toBe(409);
    await api.del(`/tables/${table.id}/`);
    expect((await api.del(`/table-folders/${folder.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/table-folders/${folder.id}/`)).statusCode).toBe(404);
    expect((await api.post(`/tables/${table.id}/restore/`)).json()).toMatchObject({ folder_id: null, folder_path: [] });
  });
});
