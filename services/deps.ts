/**
 * The one dependency shape of the use cases in `services/`: the database, the Temporal client with
 * the task queue workflows run on, and the outside services (integrations/config.ts). A service
 * function takes `Pick<ServiceDeps, …>` of what it uses, so a reader sees its reach in its
 * signature, and a route handler or an activity passes its own deps through unchanged
 * (docs/architecture.md, "One home per use case").
 */
import type { Client } from '@temporalio/client';
import type { Sql } from '../db/sql.js';
import type { Integrations } from '../integrations/config.js';

/** The Temporal client and the task queue the service's workflows run on. */
export interface TemporalHandle {
  client: Client;
  taskQueue: string;
}

export interface ServiceDeps {
  sql: Sql;
  temporal: TemporalHandle;
  integrations: Integrations;
}
