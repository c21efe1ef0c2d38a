/**
 * The suppliers a research run's tools call, built once from the environment. A supplier that is
 * not configured is absent, and its tool is refused with the reason (never faked):
 * SEARCH_API_URL (search), WORK_EMAIL_FINDER_URL (find_work_email), PEOPLE_FINDER_URL
 * (find_people_at_company); the chat model from OPENAI_* (activities/chat-model.ts). MCP servers
 * are attached per agent; pages are read over HTTP (WEB_READER_ALLOW_PRIVATE_NETWORKS for local use).
 */
import { chatModelFrom, type ChatModel } from '../chat-model.js';
import { httpMcpClient, type McpClient } from './mcp.js';
import { httpPeopleFinderSupplier, type PeopleFinderSupplier } from './people-finder.js';
import { httpSearchSupplier, type SearchSupplier } from './search.js';
import { webReader, type WebReader } from './web.js';
import { httpWorkEmailSupplier, type WorkEmailSupplier } from './work-email.js';

export interface AgentSuppliers {
  chatModel: ChatModel | null;
  search: SearchSupplier | null;
  workEmail: WorkEmailSupplier | null;
  peopleFinder: PeopleFinderSupplier | null;
  mcp: McpClient;
  web: WebReader;
}

export function agentSuppliersFrom(
  env: Record<string, string | undefined>,
  overrides: Partial<AgentSuppliers> = {},
): AgentSuppliers {
  const url = (name: string) => env[name]?.trim() || null;
  const search = url('SEARCH_API_URL');
  const workEmail = url('WORK_EMAIL_FINDER_URL');
  const people = url('PEOPLE_FINDER_URL');
  return {
    chatModel: chatModelFrom(env),
    search: search ? httpSearchSupplier(search) : null,
    workEmail: workEmail ? httpWorkEmailSupplier(workEmail) : null,
    peopleFinder: people ? httpPeopleFinderSupplier(people) : null,
    mcp: httpMcpClient(),
    web: webReader({ allowPrivateNetworks: env.WEB_READER_ALLOW_PRIVATE_NETWORKS === 'true' }),
    ...overrides,
  };
}
