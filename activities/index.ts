import type { Sql } from '../db/sql.js';
import type { ActionKind } from '../domain/pnet/limits.js';
import { createAgentRunActivities, withAgentRunWake } from './agents/agent-run.js';
import type { AgentSuppliers } from '../integrations/agent-tools/index.js';
import { createIntegrations, readIntegrationsConfig, type Integrations } from '../integrations/config.js';
import { createColumnRunActivities } from './tables/column-runs.js';
import type { EnrichmentProviders } from '../integrations/enrichment-providers/index.js';
import { createMailerActivities } from './sequences/mailer.js';
import { type StepRow } from '../store/pnet/steps.js';
import { createSequenceActivities, withSequenceWake } from './sequences/sequences.js';
import type { ChatModel } from '../integrations/chat-model.js';
import { createOutboundAgentActivities } from './agents/outbound-agent.js';
import { createTrainingActivities } from './agents/training-sessions.js';
import type { Mailer } from '../integrations/mailer.js';
import { MailboxNetwork } from '../services/inbox/mailbox-poll.js';
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
   * API; built here from the process environment when omitted. The fields below override one each.
   */
  integrations?: Integrations;
  /** Sequence email; from SMTP_URL when omitted (null: no SMTP, emails wait and say so). */
  mailer?: Mailer | null;
  /** Whether IMAP mailboxes may be on private networks; from MAILBOX_ALLOW_PRIVATE_NETWORKS when omitted. */
  mailboxNetwork?: MailboxNetwork;
  /** The enrichment providers column runs call; built from the process environment when omitted. */
  enrichmentProviders?: EnrichmentProviders;
  /** What saved agents' research runs call; built from the process environment when omitted. */
  agentSuppliers?: AgentSuppliers;
  /** The chat model the outbound agent and training sessions write with; from the environment when omitted, null for the local template writer. */
  chatModel?: ChatModel | null;
}

/** Every activity of the service, bound to its dependencies. */
export function createActivities(deps: ActivityDeps) {
  const integrations = deps.integrations ?? createIntegrations(readIntegrationsConfig());
  const mailer = deps.mailer !== undefined ? deps.mailer : integrations.mailer;
  const enrichmentProviders = deps.enrichmentProviders ?? integrations.enrichmentProviders;
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
      suppliers: deps.agentSuppliers ?? integrations.agentSuppliers,
      startStep: deps.startStep,
      businessContextChars: integrations.businessDocuments.contextChars,
    }),
    ...outboundAgentActivities(deps, integrations, enrichmentProviders),
    ...createInboxActivities({
      sql: deps.sql,
      mailboxNetwork: deps.mailboxNetwork ?? integrations.mailboxNetwork,
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
      mailer: () => (deps.mailer !== undefined ? deps.mailer : integrations.mailer),
    }),
  };
}

/** The outbound agent's writing and training sessions share one chat model (or none: the local template writer). */
function outboundAgentActivities(
  deps: ActivityDeps,
  integrations: Integrations,
  enrichmentProviders: EnrichmentProviders,
) {
  const outbound = {
    sql: deps.sql,
    chatModel: deps.chatModel === undefined ? integrations.chatModel : deps.chatModel,
    enrichmentProviders,
    businessContextChars: integrations.businessDocuments.contextChars,
  };
  return { ...createOutboundAgentActivities(outbound), ...createTrainingActivities(outbound) };
}
