/**
 * Switching the agent's tools on and off (operationIds listAgentTools, updateAgentTool). A tool is
 * available when something here supplies it, judged from the same suppliers the research runs are
 * given (services/agents/agent-tools.ts), so the switch and the runs never disagree.
 */
import type { AgentSuppliers } from '../../integrations/agent-tools/index.js';
import { ApiError } from '../../domain/shared/errors.js';
import { AgentToolKeySchema, type AgentTool, type AgentToolKey } from '../../domain/pnet/agent.js';
import { agentToolSwitches, hasConnectedPnetAccount, setAgentToolEnabled } from '../../store/agents/agent-tools.js';
import type { ServiceDeps } from '../deps.js';

export type AgentToolSwitchDeps = Pick<ServiceDeps, 'sql'> & { suppliers: AgentSuppliers };

/** Why a tool cannot run in this workspace, or null when it can. */
async function supplierGap(
  { sql, suppliers }: AgentToolSwitchDeps,
  workspaceId: string,
  key: AgentToolKey,
): Promise<string | null> {
  if (key === 'find_work_email') {
    return suppliers.workEmail ? null : 'No email-finder service is configured (WORK_EMAIL_FINDER_URL).';
  }
  return (await hasConnectedPnetAccount(sql, workspaceId))
    ? null
    : 'No pnet account of this workspace is connected to read profiles with.';
}

export async function readAgentTools(deps: AgentToolSwitchDeps, workspaceId: string): Promise<AgentTool[]> {
  const rows = await agentToolSwitches(deps.sql, workspaceId);
  return Promise.all(
    AgentToolKeySchema.options.map(async (key) => {
      const gap = await supplierGap(deps, workspaceId, key);
      // An enabled tool whose supplier went away reads as off: it cannot run.
      const enabled = (rows.find((r) => r.key === key)?.enabled ?? false) && gap === null;
      return { key, available: gap === null, enabled, unavailable_reason: gap };
    }),
  );
}

/** Switching on a tool whose supplier is unavailable is refused (409) and changes nothing. */
export async function switchAgentTool(
  deps: AgentToolSwitchDeps,
  workspaceId: string,
  key: AgentToolKey,
  enabled: boolean,
): Promise<AgentTool> {
  if (enabled) {
    const gap = await supplierGap(deps, workspaceId, key);
    if (gap) throw new ApiError('conflict', `${key} cannot be switched on: ${gap}`);
  }
  await setAgentToolEnabled(deps.sql, workspaceId, key, enabled);
  return (await readAgentTools(deps, workspaceId)).find((t) => t.key === key)!;
}
