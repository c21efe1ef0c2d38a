/**
 * What Postgres's busy backends were doing during a window, sampled from pg_stat_activity every
 * 20 ms: per statement and wait event, how many backends were in that state on average. A
 * check-in batch waiting on `Lock:transactionid` is waiting for another transaction's row lock;
 * `CPU` means running (or waiting for a core, which pg_stat_activity cannot tell apart).
 */
import type { Sql } from '../db/sql.js';

export interface PgWait {
  statement: string;
  wait: string;
  /** Backends in this state at an average moment of the window. */
  average: number;
}

/** Statements the bench knows by their opening words; others show their first words. */
const names: [RegExp, string][] = [
  [/^with i as \( select \* from json_to_recordset/, 'check-in batch'],
  [/^select 1$/, 'baseline select 1'],
];

function statementName(query: string): string {
  const flat = query.replace(/\s+/g, ' ').trim();
  for (const [pattern, name] of names) if (pattern.test(flat)) return name;
  return flat.slice(0, 70);
}

export function sampleWaits(sql: Sql, everyMs = 20): { stop: () => Promise<PgWait[]> } {
  const counts = new Map<string, { statement: string; wait: string; n: number }>();
  let ticks = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const rows = await sql<{ wait: string; query: string }[]>`
        select coalesce(wait_event_type || ':' || wait_event, 'CPU') as wait, query from pg_stat_activity
        where state = 'active' and backend_type = 'client backend' and pid <> pg_backend_pid()`;
      ticks += 1;
      for (const row of rows) {
        const statement = statementName(row.query);
        const key = `${statement}\u0000${row.wait}`;
        const entry = counts.get(key) ?? { statement, wait: row.wait, n: 0 };
        entry.n += 1;
        counts.set(key, entry);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, everyMs - (Date.now() - started))));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return [...counts.values()]
        .map((c) => ({ statement: c.statement, wait: c.wait, average: c.n / Math.max(1, ticks) }))
        .sort((a, b) => b.average - a.average);
    },
  };
}
