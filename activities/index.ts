import type { Sql } from '../db/sql.js';
import type { ActionKind } from '../domain/pnet/limits.js';
import { createAgentRunActivities, withAgentRunWake } from './agents/agent-run.js';
import type { Integrations } from '../integrations/config.js';
import { createColumnRunActivities } from './tables/column-runs.js';
import { createMailerActivities } from './sequences/mailer.js';
import { type StepRow } from '../store/pnet/steps.js';
import { createSequenceActivities, withSequenceWake } from './sequences/sequences.js';
import { createOutboundAgentActivities } from './agents/outbound-agent.js';
import { createTrainingActivities } from './agents/training-sessions.js';
import { createInboxActivities } from './inbox/inbox.js';
import { createCreditActivities } from './platform/credits.js';
import { createBillingActivities } from './billing/billing.js';
import { createSenderAccountActivities } from './pnet/sender-account.js';
import { createPnetStepActivities } from './pnet/steps.js';
import { createChatAttachmentActivities } from './assistant/attachments.js';
import { createDocumentExtractor } from '../integrations/documents/extractor.js';
import { createAssistantTurnActivities } from './assistant/turn.js';
import { createCardActivities } from './assistant/cards.js';
import { createDocumentActivities } from './documents/documents.js';
import { createNotificationActivities } from './notifications/notifications.js';
import { createSourcingActivities } from './sourcing/index.js';
import { createAffiliatePayoutActivities } from './affiliates/payouts.js';
import { createCommissionMaturationActivities } from './affiliates/maturation.js';

export interface ActivityDeps {
  sql: Sql;
  /** Starts a step's workflow (idempotent: a running one is left as it is). */
  startStep: (row: StepRow) => Promise<void>;
  housekeeping?: Partial<Record<ActionKind, number>>;
  /**
   * The outside services (integrations/config.ts), built once by the bootstrap and shared with the
   * API; a test builds them the same way with its own pieces in place (test/support/integrations.ts).
   */
  integrations: Integrations;
}

/** Every activity of the service, bound to its dependencies. */
export function createActivities(deps: ActivityDeps) {
  const { integrations } = deps;
  const { mailer, enrichmentProviders } = integrations;
  const extractor = createDocumentExtractor(integrations.chatAttachments);
  return {
    ...createCreditActivities(deps),
    ...withAgentRunWake(withSequenceWake(createPnetStepActivities(deps), deps.sql), deps.sql),
    ...createSenderAccountActivities(deps),
    ...createColumnRunActivities({ sql: deps.sql, enrichmentProviders }),
    ...createSequenceActivities({ sql: deps.sql, ...(mailer ? { messageDomain: mailer.domain } : {}) }),
    ...createMailerActivities({ sql: deps.sql, mailer, publicBaseUrl: integrations.publicBaseUrl }),
    ...createAgentRunActivities({
      sql: deps.sql,
      suppliers: integrations.agentSuppliers,
      startStep: deps.startStep,
      businessContextChars: integrations.businessDocuments.contextChars,
    }),
    ...outboundAgentActivities(deps.sql, integrations),
    ...createInboxActivities({
      sql: deps.sql,
      mailboxNetwork: integrations.mailboxNetwork,
      integrations,
    }),
    ...createAssistantTurnActivities({
      sql: deps.sql,
      chatModel: () => integrations.chatModel,
      operations: () => integrations.operations,
      endpoints: () => integrations.webEndpoint,
      enrichmentProviders,
      businessContextChars: () => integrations.businessDocuments.contextChars,
    }),
    ...createCardActivities({
      sql: deps.sql,
      enrichmentProviders,
      operations: () => integrations.operations,
      endpoints: () => integrations.webEndpoint,
    }),
    ...createChatAttachmentActivities({ sql: deps.sql, extractor }),
    // Business-context documents share the attachments' extractor threads (and their limits).
    ...createDocumentActivities({
      sql: deps.sql,
      extractor,
      chatModel: () => integrations.chatModel,
      drive: { integrations, maxBytes: integrations.businessDocuments.maxUploadBytes },
    }),
    ...createBillingActivities({ sql: deps.sql }),
    ...createCommissionMaturationActivities({ sql: deps.sql }),
    ...createSourcingActivities({ sql: deps.sql, integrations }),
    ...createAffiliatePayoutActivities({ sql: deps.sql, integrations }),
    ...createNotificationActivities({
      sql: deps.sql,
      integrations,
      mailer: () => integrations.mailer,
    }),
  };
}

/** The outbound agent's writing and training sessions share one chat model (or none: the local template writer). */
function outboundAgentActivities(sql: Sql, integrations: Integrations) {
  const outbound = {
    sql,
    chatModel: integrations.chatModel,
    enrichmentProviders: integrations.enrichmentProviders,
    businessContextChars: integrations.businessDocuments.contextChars,
  };
  return { ...createOutboundAgentActivities(outbound), ...createTrainingActivities(outbound) };
}
