/**
 * Migration numbering: files are recorded by name, so numbers are never reused or closed up;
 * every gap is a retired number with its reason (db/migrate.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  checkMigrationNumbers,
  droppedMigrationFiles,
  migrationFiles,
  retiredMigrationNumbers,
} from '../../db/migrate.js';

describe('migration numbers', () => {
  it('run from 001 without a gap or a repeat, except the retired numbers', () => {
    const files = migrationFiles();
    expect(files.length).toBeGreaterThan(20);
    expect(checkMigrationNumbers(files)).toEqual([]);
  });

  it('give every retired number a reason, and no dropped file is back', () => {
    for (const reason of Object.values(retiredMigrationNumbers)) expect(reason.length).toBeGreaterThan(10);
    const files = migrationFiles();
    for (const dropped of Object.keys(droppedMigrationFiles)) expect(files).not.toContain(dropped);
  });

  it('refuses a gap, a number taken twice and a retired number taken again', () => {
    expect(checkMigrationNumbers(['001_a.sql', '002_b.sql', '003_c.sql'], {})).toEqual([]);
    expect(checkMigrationNumbers([], {})).toEqual([]);

    const gap = checkMigrationNumbers(['001_a.sql', '003_c.sql'], {});
    expect(gap).toHaveLength(1);
    expect(gap[0]).toMatch(/^migration number 002 is missing/);
    expect(checkMigrationNumbers(['001_a.sql', '003_c.sql'], { 2: 'dropped before commit' })).toEqual([]);
    expect(checkMigrationNumbers(['002_b.sql'], {})[0]).toMatch(/^migration number 001 is missing/);

    const twice = checkMigrationNumbers(['001_a.sql', '002_b.sql', '002_c.sql'], {});
    expect(twice).toEqual([
      expect.stringMatching(/^migration number 002 is taken by 2 files \(002_b\.sql, 002_c\.sql\)/),
    ]);

    const retaken = checkMigrationNumbers(['001_a.sql', '002_b.sql', '003_c.sql'], { 2: 'dropped before commit' });
    expect(retaken).toEqual([
      expect.stringMatching(
        /^migration number 002 is retired \(dropped before commit\) but 002_b\.sql takes it: use 004\./,
      ),
    ]);
  });

  it('ignores files that are not migrations', () => {
    expect(checkMigrationNumbers(['001_a.sql', 'README.md', '002_b.sql.orig', '2_c.sql'], {})).toEqual([]);
  });
});
