/**
 * Where a running local stack tells the operator command line about itself, and the service's
 * database: kept apart from stack.ts so the command line starts without loading the API and worker.
 */
import { join } from 'node:path';
import { createSql } from '../db/sql.js';

export const databaseName = 'outreach';

/** What a running stack tells the admin command line (written to DATA_DIR/stack.json). */
export interface StackFile {
  pid: number;
  database_url: string;
  temporal_address: string;
  api_url: string | null;
}

export function stackFilePath(dataDir: string) {
  return join(dataDir, 'stack.json');
}

export async function ensureDatabase(adminUrl: string, name: string) {
  const admin = createSql(adminUrl, { max: 1 });
  try {
    const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
    if (!exists) await admin`create database ${admin(name)}`;
  } finally {
    await admin.end();
  }
}
