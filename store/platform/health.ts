/** The database's side of the health checks. */
import type { Db } from '../../db/sql.js';

/** One round trip (`select 1`): whether Postgres answers. */
export async function pingDatabase(sql: Db): Promise<void> {
  await sql`select 1`;
}
