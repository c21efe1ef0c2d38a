import type { Sql } from '../db/sql.js';
import type { ActionKind } from '../domain/pnet.js';
import { createCreditActivities } from './credits.js';
import { createPnetStepActivities, type StepRow } from './pnet-steps.js';
import { createSenderAccountActivities } from './sender-account.js';

export interface ActivityDeps {
  sql: Sql;
  /** Starts a step's workflow (idempotent: a running one is left as it is). */
  startStep: (row: StepRow) => Promise<void>;
  housekeeping?: Partial<Record<ActionKind, number>>;
}

/** Every activity of the service, bound to its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return { ...createCreditActivities(deps), ...createPnetStepActivities(deps), ...createSenderAccountActivities(deps) };
}
