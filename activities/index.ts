import type { Sql } from '../db/sql.js';
import type { ActionKind } from '../domain/pnet.js';
import { createColumnRunActivities } from './column-runs.js';
import { createCreditActivities } from './credits.js';
import { createEnrichmentProviders, type EnrichmentProviders } from './enrichment-providers/index.js';
import { createPnetStepActivities, type StepRow } from './pnet-steps.js';
import { createSenderAccountActivities } from './sender-account.js';

export interface ActivityDeps {
  sql: Sql;
  /** Starts a step's workflow (idempotent: a running one is left as it is). */
  startStep: (row: StepRow) => Promise<void>;
  housekeeping?: Partial<Record<ActionKind, number>>;
  /** The enrichment providers column runs call; built from the process environment when omitted. */
  enrichmentProviders?: EnrichmentProviders;
}

/** Every activity of the service, bound to its dependencies. */
export function createActivities(deps: ActivityDeps) {
  const enrichmentProviders = deps.enrichmentProviders ?? createEnrichmentProviders({ env: process.env });
  return { ...createCreditActivities(deps), ...createPnetStepActivities(deps), ...createSenderAccountActivities(deps),
    ...createColumnRunActivities({ sql: deps.sql, enrichmentProviders }) };
}
