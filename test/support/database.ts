import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, inject } from 'vitest';
import { createSql, type Sql } from '../../db/sql.js';

/** A fresh, migrated database of this test file's own, cloned from the template. */
export async function createTestDatabase(): Promise<{ sql: Sql; url: string; drop: () => Promise<void> }> {
  const adminUrl = inject('pgAdminUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = createSql(adminUrl, { max: 1 });
  await admin`create database ${admin(name)} template ${admin(inject('templateDatabase'))}`;
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  const sql = createSql(url, { max: 5 });
  return {
    sql,
    url,
    drop: async () => {
      await sql.end({ timeout: 5 });
      await admin`drop database if exists ${admin(name)} with (force)`;
      await admin.end();
    },
  };
}

/**
 * The file's own database, created before its tests (beforeAll) and dropped after them
 * (afterAll). The object answered is filled in beforeAll: read `db.sql` inside hooks and tests.
 */
export function useTestDatabase(): { sql: Sql; url: string } {
  const db = {} as Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => void Object.assign(db, await createTestDatabase()));
  afterAll(() => db.drop?.());
  return db;
}
