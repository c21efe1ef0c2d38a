import type { FastifyBaseLogger } from 'fastify';
import type { Sql } from '../db/sql.js';
import type { RateLimitConfig } from './plugins/rate-limit.js';
import type { TokenVerifier } from '../services/platform/tokens.js';
import type { Integrations } from '../integrations/config.js';
import type { TemporalHandle } from '../services/deps.js';

/** Everything the API needs from outside; tests pass real ones built on their own database. */
export interface AppDeps {
  sql: Sql;
  /**
   * `eagerStart`: the client shares its connection with a worker of the task queue in this
   * process, so a step's workflow can start with its first task handed straight to that worker.
   */
  temporal: TemporalHandle & { eagerStart?: boolean };
  verifyToken: TokenVerifier;
  rateLimit: RateLimitConfig;
  logger?: FastifyBaseLogger | boolean;
  /**
   * The outside services (integrations/config.ts), built once by the bootstrap and shared with the
   * worker; a test builds them the same way with its own pieces in place (test/support/integrations.ts).
   */
  integrations: Integrations;
  /**
   * Fault points for the chaos runs (sim/run-api.ts), never set by the service itself:
   * `afterClaimCommit` runs between a claim's commit and its signal to the step's workflow.
   */
  faults?: { afterClaimCommit?: () => void };
}
