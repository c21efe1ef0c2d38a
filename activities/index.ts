import type { Sql } from '../db/sql.js';
import { createCreditActivities } from './credits.js';
import { createPnetStepActivities } from './pnet-steps.js';

export interface ActivityDeps {
  sql: Sql;
}

/** Every activity of the service, bound to its dependencies. */
export function createActivities(deps: ActivityDeps) {
  return { ...createCreditActivities(deps), ...createPnetStepActivities(deps) };
}
