/** Queries of outbound agents, their versions and conversations (2.6). Every query is scoped to the workspace. */
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import type {
  AgentSlot,
  Conversation,
  OutboundAgent,
  OutboundAgentCreate,
  OutboundAgentUpdate,
  OutboundAgentVersion,
  OutboundMessage,
  ResearchFact,
} from '../../domain/agents/outbound-agents.js';

interface AgentRecord {
  id: string;
  name: string;
  version: number;
  instructions: string;
  slots: AgentSlot[];
  created_at: Date;
  updated_at: Date;
}

const toAgent = (r: AgentRecord): OutboundAgent => ({
  id: r.id,
  name: r.name,
  version: r.version,
  instructions: r.instructions,
  slots: r.slots,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/**
 * Slot keys name the sequence steps, so two prompts for one key would be ambiguous. The schema
 * cannot say "unique by key", and a request the schema accepts is never a 422 here: it is a 409.
 */
function checkSlots(slots: AgentSlot[] | undefined) {
  const seen = new Set<string>();
  for (const slot of slots ?? []) {
    if (seen.has(slot.slot_key)) throw new ApiError('conflict', `The slot key "${slot.slot_key}" appears twice; each slot has one prompt.`);
    seen.add(slot.slot_key);
  }
}

async function selectAgents(db: Db, workspaceId: string, agentId?: string): Promise<AgentRecord[]> {
  return db<AgentRecord[]>`
    select a.id, a.name, a.version, v.instructions, v.slots, a.created_at, a.updated_at
    from outbound_agents a join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
    where a.workspace_id = ${workspaceId} ${agentId ? db`and a.id = ${agentId}` : db``}
    order by a.created_at desc, a.id desc`;
}

export async function createAgent(sql: Sql, workspaceId: string, body: OutboundAgentCreate): Promise<OutboundAgent> {
  checkSlots(body.slots);
  return sql.begin(async (tx) => {
    const [agent] = await tx<{ id: string }[]>`
      insert into outbound_agents (workspace_id, name) values (${workspaceId}, ${body.name}) returning id`;
    await tx`
      insert into outbound_agent_versions (agent_id, version, instructions, slots, origin)
      values (${agent!.id}, 1, ${body.instructions}, ${tx.json(body.slots as never)}, 'created')`;
    return toAgent((await selectAgents(tx, workspaceId, agent!.id))[0]!);
  }) as Promise<OutboundAgent>;
}

export async function listAgents(sql: Sql, workspaceId: string): Promise<OutboundAgent[]> {
  return (await selectAgents(sql, workspaceId)).map(toAgent);
}

export async function getAgent(db: Db, workspaceId: string, agentId: string): Promise<OutboundAgent | undefined> {
  const [agent] = await selectAgents(db, workspaceId, agentId);
  return agent && toAgent(agent);
}

/**
 * Adds a version with these prompts on top of the current one, under the agent row's lock, so
 * two concurrent edits make two versions rather than one lost. Answers the new version number.
 */
export async function addVersion(
  tx: Db,
  agentId: string,
  prompts: { instructions: string; slots: AgentSlot[] },
  origin: string,
): Promise<number> {
  const [agent] = await tx<{ version: number }[]>`
    update outbound_agents set version = version + 1, updated_at = now() where id = ${agentId} returning version`;
  await tx`
    insert into outbound_agent_versions (agent_id, version, instructions, slots, origin)
    values (${agentId}, ${agent!.version}, ${prompts.instructions}, ${tx.json(prompts.slots as never)}, ${origin})`;
  return agent!.version;
}

/** A name change keeps the version; a change of instructions or slots makes a new version. */
export async function updateAgent(sql: Sql, workspaceId: string, agentId: string, body: OutboundAgentUpdate): Promise<OutboundAgent | undefined> {
  checkSlots(body.slots);
  return sql.begin(async (tx) => {
    const [current] = await tx<AgentRecord[]>`
      select a.id, a.name, a.version, v.instructions, v.slots, a.created_at, a.updated_at
      from outbound_agents a join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
      where a.id = ${agentId} and a.workspace_id = ${workspaceId}
      for update of a`;
    if (!current) return undefined;
    if (body.name !== undefined && body.name !== current.name) {
      await tx`update outbound_agents set name = ${body.name}, updated_at = now() where id = ${agentId}`;
    }
    const instructions = body.instructions ?? current.instructions;
    const slots = body.slots ?? current.slots;
    if (instructions !== current.instructions || JSON.stringify(slots) !== JSON.stringify(current.slots)) {
      await addVersion(tx, agentId, { instructions, slots }, 'edited');
    }
    return getAgent(tx, workspaceId, agentId);
  }) as Promise<OutboundAgent | undefined>;
}

export async function listVersions(sql: Sql, workspaceId: string, agentId: string): Promise<OutboundAgentVersion[] | undefined> {
  if (!(await getAgent(sql, workspaceId, agentId))) return undefined;
  const rows = await sql<(Omit<OutboundAgentVersion, 'created_at'> & { created_at: Date })[]>`
    select version, instructions, slots, origin, created_at from outbound_agent_versions where agent_id = ${agentId} order by version desc`;
  return rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
}

/** Attaches an agent to a sequence (or detaches with null); both must be the workspace's. */
export async function setSequenceAgent(sql: Sql, workspaceId: string, sequenceId: string, agentId: string | null) {
  if (agentId && !(await getAgent(sql, workspaceId, agentId))) throw notFound('Outbound agent');
  const [row] = await sql<{ id: string; outbound_agent_id: string | null }[]>`
    update sequences set outbound_agent_id = ${agentId}, updated_at = now()
    where id = ${sequenceId} and workspace_id = ${workspaceId}
    returning id, outbound_agent_id`;
  if (!row) throw notFound('Sequence');
  return { sequence_id: row.id, agent_id: row.outbound_agent_id };
}

export async function getSequenceAgent(sql: Sql, workspaceId: string, sequenceId: string) {
  const [row] = await sql<{ id: string; outbound_agent_id: string | null }[]>`
    select id, outbound_agent_id from sequences where id = ${sequenceId} and workspace_id = ${workspaceId}`;
  if (!row) throw notFound('Sequence');
  return { sequence_id: row.id, agent_id: row.outbound_agent_id };
}

interface ConversationRecord {
  id: string;
  company_key: string;
  subject_key: string;
  last_turn_at: Date | null;
  researched_at: Date | null;
  sources: string[];
  research_brief: ResearchFact[];
}

type MessageRecord = Omit<OutboundMessage, 'created_at' | 'sent_at'> & { created_at: Date; sent_at: Date | null };

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** Endpoint 5: the conversation of one contact with the agent, messages oldest first. */
export async function readConversation(sql: Sql, workspaceId: string, agentId: string, contactKey: string): Promise<Conversation | undefined> {
  const [conversation] = await sql<ConversationRecord[]>`
    select c.id, c.company_key, c.subject_key, c.last_turn_at, c.researched_at, c.sources, c.research_brief
    from outbound_conversations c
    where c.agent_id = ${agentId} and c.workspace_id = ${workspaceId} and c.contact_key = ${contactKey}`;
  if (!conversation) return undefined;
  const messages = await sql<MessageRecord[]>`
    select id, conversation_id, agent_version, angle, slot_key, kind, subject, body, generated_subject, generated_body, reasoning,
      facts_used, findings, judge_verdict, confidence, confidence_score, confident, insufficient_data, is_preview, opens_thread,
      model_key, reach, price_tenths, credits_charged, quality_score, status, error, created_at, sent_at
    from outbound_messages where conversation_id = ${conversation.id}
    order by created_at, id`;
  const emptyVerdict = { grounded: false, language_ok: false, on_topic: false, safe: false, quality_score: 0, reasons: [] };
  return {
    ...conversation,
    last_turn_at: iso(conversation.last_turn_at),
    researched_at: iso(conversation.researched_at),
    messages: messages.map((m) => ({
      ...m,
      // A write under way or failed has no verdict yet.
      judge_verdict: 'grounded' in m.judge_verdict ? m.judge_verdict : emptyVerdict,
      created_at: m.created_at.toISOString(),
      sent_at: iso(m.sent_at),
    })),
  };
}
