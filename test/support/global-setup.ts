/**
 * One embedded Postgres and one Temporal dev server for the whole run. Migrations run once into
 * a template database; each test file clones it (CREATE DATABASE ... TEMPLATE), so files run in
 * parallel without sharing rows. The workflow bundle is built once and shared by every worker,
 * and so are the API's and the worker's child scripts (`npm run build`'s bundling), which the
 * fault tests kill and restart.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { migrate } from '../../db/migrate.js';
import { createSql } from '../../db/sql.js';
import { startEmbeddedPostgres } from '../../worker/embedded-postgres.js';
import { startTemporalDevServer } from '../../worker/temporal-dev-server.js';
import { buildServiceScripts, type ServiceScripts } from '../../sim/service-process.js';

export const templateDatabase = 'outreach_template';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    templateDatabase: string;
    temporalAddress: string;
    workflowBundlePath: string;
    serviceScripts: ServiceScripts;
  }
}

export default async function setup(project: TestProject) {
  const root = mkdtempSync(join(tmpdir(), 'outreach-test-'));
  // As root, Postgres runs as its own user, which must be able to reach its data folder.
  chmodSync(root, 0o755);
  const started = await Promise.allSettled([
    startEmbeddedPostgres({ dataDir: join(root, 'postgres'), preferredPort: 55432, fast: true }),
    startTemporalDevServer({ preferredPort: 57233, ui: false }),
    buildServiceScripts(),
  ] as const);
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    for (const s of started) if (s.status === 'fulfilled' && 'stop' in s.value) await s.value.stop();
    for (const s of started) if (s.status === 'fulfilled' && 'remove' in s.value) s.value.remove();
    throw failed.reason;
  }
  const [pg, temporal, built] = started.map((s) => (s as PromiseFulfilledResult<unknown>).value) as [
    Awaited<ReturnType<typeof startEmbeddedPostgres>>,
    Awaited<ReturnType<typeof startTemporalDevServer>>,
    Awaited<ReturnType<typeof buildServiceScripts>>,
  ];
  const scripts: ServiceScripts = built.scripts;
  const admin = createSql(pg.url('postgres'), { max: 1 });
  await admin`create database ${admin(templateDatabase)}`;
  await admin.end();
  const template = createSql(pg.url(templateDatabase), { max: 1 });
  await migrate(template);
  await template.end();

  project.provide('pgAdminUrl', pg.url('postgres'));
  project.provide('templateDatabase', templateDatabase);
  project.provide('temporalAddress', temporal.address);
  project.provide('workflowBundlePath', scripts.workflowBundle);
  project.provide('serviceScripts', scripts);

  return async () => {
    await temporal.stop();
    await pg.stop();
    built.remove();
    rmSync(root, { recursive: true, force: true });
  };
}
