/** Data sourcing's activities (decisions 041, 042), bound to the service's database and outside services. */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { createLeadSearchActivities } from './lead-search.js';
import { createCrmActivities } from './crm.js';
import { createSubdomainActivities } from './subdomains.js';

export function createSourcingActivities(deps: {
  sql: Sql;
  integrations: Pick<Integrations, 'sourcing' | 'secretsKeys' | 'webEndpoint'>;
}) {
  return { ...createLeadSearchActivities(deps), ...createCrmActivities(deps), ...createSubdomainActivities(deps) };
}
