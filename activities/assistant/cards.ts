/**
 * The card activities of an assistant turn, each a door to its use case in
 * services/assistant/cards.ts (deciding a card and applying it, once per card whatever retries,
 * restarts or double clicks happen). Their names and arguments are what the turn's workflow calls.
 */
import { Context } from '@temporalio/activity';
import type { DecideCardRequest } from '../../services/assistant/cards.js';
import * as cards from '../../services/assistant/cards.js';
import type { VerbDeps } from '../../services/assistant/verbs.js';
import type { ServiceDeps } from '../../services/deps.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import type { EndpointCaller } from '../../integrations/web/web-endpoint.js';
import type { OperationDoor } from '../../domain/assistant/tool-cards.js';

export interface CardActivityDeps extends Pick<ServiceDeps, 'sql'> {
  enrichmentProviders: EnrichmentProviders;
  operations: () => OperationDoor | null;
  endpoints: () => EndpointCaller;
}

export function createCardActivities(deps: CardActivityDeps) {
  const { sql } = deps;
  /** A verb's deps in this worker: its integrations, and the Temporal client and task queue of the running activity. */
  const verbDeps = (): VerbDeps => {
    const { client, info } = Context.current();
    return {
      sql,
      providers: deps.enrichmentProviders,
      temporal: { client, taskQueue: info.taskQueue },
      operations: deps.operations,
      endpoints: deps.endpoints,
    };
  };

  return {
    decideCard: async (req: DecideCardRequest) => cards.decideCard(verbDeps(), req),
    checkCardRun: async ({ cardId }: { cardId: string }) => cards.checkCardRun({ sql }, cardId),
    expireCards: async ({ messageId }: { messageId: string }) => cards.expireCards({ sql }, messageId),
  };
}

export type CardActivities = ReturnType<typeof createCardActivities>;
