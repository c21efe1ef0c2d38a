import type { FastifyBaseLogger } from 'fastify';
import type { AgentSuppliers } from '../integrations/agent-tools/index.js';
import type { EnrichmentProviders } from '../integrations/enrichment-providers/index.js';
import type { ChatModel } from '../integrations/chat-model.js';
import type { Sql } from '../db/sql.js';
import type { RateLimitConfig } from './plugins/rate-limit.js';
import type { TokenVerifier } from '../services/platform/tokens.js';
import type { Mailer } from '../integrations/mailer.js';
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
   * worker; built from the process environment when omitted. The fields below override one each.
   */
  integrations?: Integrations;
  /**
   * Enrichment providers of this environment (listEnrichmentProviders); built from the process
   * environment when omitted.
   */
  enrichmentProviders?: EnrichmentProviders;
  /** What saved agents run on (chat model, search, email finder, ...); built from the process environment when omitted. */
  agentSuppliers?: AgentSuppliers;
  /** The inbox's reply mailer and suggestion writer; from the process environment (SMTP_URL, OPENAI_*) when omitted, null for none. */
  inbox?: { mailer?: Mailer | null; chatModel?: ChatModel | null };
  /**
   * Fault points for the chaos runs (sim/run-api.ts), never set by the service itself:
   * `afterClaimCommit` runs between a claim's commit and its signal to the step's workflow.
   */
  faults?: { afterClaimCommit?: () => void };
}

/** What the routes get: the caller's deps with every outside service filled in by buildApp. */
export interface RouteDeps extends AppDeps {
  integrations: Integrations;
  enrichmentProviders: EnrichmentProviders;
  agentSuppliers: AgentSuppliers;
  inbox: { mailer: Mailer | null; chatModel: ChatModel | null };
}
