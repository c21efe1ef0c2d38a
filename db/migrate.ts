/**
 * Forward-only migrations: numbered SQL files applied in order, each in its own transaction,
 * recorded in schema_migrations. An advisory lock lets two processes start at once safely.
 *
 * A migration is recorded by its file name, not by a checksum, so a file is never renamed: a
 * database that applied `007_step_lifecycle.sql` would run it again as `006_step_lifecycle.sql`
 * (and fail on tables that exist). The numbers therefore keep their gaps, and the gaps are
 * listed below with their reason: `checkMigrationNumbers` refuses a new gap, two files of one
 * number, and a file taking a retired number.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './sql.js';

const migrationsDir = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
const lockKey = 7_412_003;

/**
 * Numbers no file may take again. A developer's `.data` may have recorded a migration of that
 * number by name (from a branch, or before it was dropped); nothing reads those rows, and a new
 * file under the same number would be easy to mistake for it.
 */
export const retiredMigrationNumbers: Readonly<Record<number, string>> = {
  6: 'Skipped: no 006 file was ever committed (numbers were taken ahead while areas were built in parallel, as 014 and 018 were before 013).',
  19: 'Skipped: no 019 file was ever committed (taken ahead like 006; 020 followed 018).',
};

/**
 * Files that were dropped after they were committed, whose number a later file took (decided
 * before this check existed; it is not to be repeated): `.data` folders may list them as applied.
 */
export const droppedMigrationFiles: Readonly<Record<string, string>> = {
  '022_check_in_fillfactor.sql':
    'Dropped (measured in bench:pnet, it changed nothing); 022 is now 022_browser_steps_run.sql.',
};

const migrationName = /^(\d{3})_[a-z0-9_]+\.sql$/;

export function migrationFiles(): string[] {
  return readdirSync(migrationsDir)
    .filter((name) => migrationName.test(name))
    .sort();
}

/**
 * Problems with the numbering of `files`: from 001 up to the highest, every number has exactly one
 * file unless it is retired, and no retired number has one. Empty when the numbering is sound.
 */
export function checkMigrationNumbers(
  files: readonly string[],
  retired: Readonly<Record<number, string>> = retiredMigrationNumbers,
): string[] {
  const byNumber = new Map<number, string[]>();
  for (const name of files) {
    const match = migrationName.exec(name);
    if (!match) continue;
    const n = Number(match[1]);
    byNumber.set(n, [...(byNumber.get(n) ?? []), name]);
  }
  const problems: string[] = [];
  const highest = Math.max(0, ...byNumber.keys());
  for (let n = 1; n <= highest; n += 1) {
    const names = byNumber.get(n) ?? [];
    const label = String(n).padStart(3, '0');
    if (Object.hasOwn(retired, n)) {
      if (names.length > 0)
        problems.push(
          `migration number ${label} is retired (${retired[n]}) but ${names.join(', ')} takes it: use ${String(highest + 1).padStart(3, '0')}.`,
        );
    } else if (names.length === 0) {
      problems.push(
        `migration number ${label} is missing: number files one after another, or list ${label} in retiredMigrationNumbers (db/migrate.ts) with the reason.`,
      );
    } else if (names.length > 1) {
      problems.push(
        `migration number ${label} is taken by ${names.length} files (${names.join(', ')}): each file gets a number of its own.`,
      );
    }
  }
  return problems;
}

/** `before` stops at the first file whose name sorts at or after it (a test's pre-migration state). */
export async function migrate(sql: Sql, options: { before?: string } = {}): Promise<string[]> {
  const files = migrationFiles();
  const problems = checkMigrationNumbers(files);
  if (problems.length > 0) throw new Error(`The migrations in db/migrations are misnumbered: ${problems.join(' ')}`);
  const applied: string[] = [];
  await sql.reserve().then(async (conn) => {
    try {
      await conn`select pg_advisory_lock(${lockKey})`;
      await conn`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`;
      const done = new Set((await conn<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name));
      for (const name of files) {
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
