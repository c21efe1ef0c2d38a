/**
 * Forward-only migrations: numbered SQL files applied in order, each in its own transaction,
 * recorded in schema_migrations. An advisory lock lets two processes start at once safely.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './sql.js';

const migrationsDir = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
const lockKey = 7_412_003;

export function migrationFiles(): string[] {
  return readdirSync(migrationsDir)
    .filter((name) => /^\d{3}_[a-z0-9_]+\.sql$/.test(name))
    .sort();
}

/** `before` stops at the first file whose name sorts at or after it (a test's pre-migration state). */
export async function migrate(sql: Sql, options: { before?: string } = {}): Promise<string[]> {
  const applied: string[] = [];
  await sql.reserve().then(async (conn) => {
    try {
      await conn`select pg_advisory_lock(${lockKey})`;
      await conn`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`;
      const done = new Set((await conn<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name));
      for (const name of migrationFiles()) {
        if (options.before !== undefined && name >= options.before) break;
        if (done.has(name)) continue;
        const text = readFileSync(join(migrationsDir, name), 'utf8');
        await conn`begin`;
        try {
          // Migration files are our own source, never user input.
          await conn.unsafe(text);
          await conn`insert into schema_migrations (name) values (${name})`;
          await conn`commit`;
        } catch (error) {
          await conn`rollback`;
          throw new Error(`migration ${name} failed: ${(error as Error).message}`);
        }
        applied.push(name);
      }
    } finally {
      await conn`select pg_advisory_unlock(${lockKey})`.catch(() => {});
      conn.release();
    }
  });
  return applied;
}
