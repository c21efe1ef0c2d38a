/** The test stack of the saved-agent tests: agents whose runs go to a local chat-completions server. */
import { afterAll, beforeAll } from 'vitest';
import { agentSuppliersFrom } from '../../integrations/agent-tools/index.js';
import { serveChatCompletions } from './local-servers.js';
import { tablesClient, type TablesClient } from './tables.js';
import { useTestStack, withKey } from './test-stack.js';

/**
 * A local chat-completions server answering as `answer` (started before the stack, closed after),
 * the model of the stack's agents; `api` calls the API as the paid workspace once the hooks ran.
 */
export function useSavedAgentStack(answer: Parameters<typeof serveChatCompletions>[0]) {
  let model: Awaited<ReturnType<typeof serveChatCompletions>>;
  beforeAll(async () => {
    model = await serveChatCompletions(answer);
  });
  afterAll(() => model?.close());

  const { stack, paid } = useTestStack({
    agentSuppliers: () =>
      agentSuppliersFrom({ OPENAI_API_KEY: 'k', OPENAI_MODEL: 'local-model', OPENAI_BASE_URL: `${model.url}/v1` }),
  });
  const api = {} as TablesClient;
  beforeAll(() => {
    Object.assign(api, tablesClient(stack, withKey(paid.apiKey)));
  });
  return { stack, paid, api };
}
