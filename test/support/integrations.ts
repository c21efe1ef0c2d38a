/**
 * The outside services as the bootstrap builds them (integrations/config.ts), from this process's
 * environment, with a test's own pieces in place of some: the one way a test gives the API and the
 * worker a local twin (a chat model, enrichment providers, a mailer).
 */
import { createIntegrations, readIntegrationsConfig, type Integrations } from '../../integrations/config.js';

export function testIntegrations(own: Partial<Integrations> = {}): Integrations {
  return { ...createIntegrations(readIntegrationsConfig(process.env)), ...own };
}
