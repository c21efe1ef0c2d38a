import type { Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { EnrichmentProviders } from '../activities/enrichment-providers/index.js';
import type { Sql } from '../db/sql.js';
import type { RateLimitConfig } from './rate-limit.js';
import type { TokenVerifier } from './tokens.js';

/** Everything the API needs from outside; tests pass real ones built on their own database. */
export interface AppDeps {
  sql: Sql;
  temporal: { client: Client; taskQueue: string };
  verifyToken: TokenVerifier;
  rateLimit: RateLimitConfig;
  logger?: FastifyBaseLogger | boolean;
  /** Enrichment providers of this environment (endpoint 10); built from the process environment when omitted. */
  enrichmentProviders?: EnrichmentProviders;
}
