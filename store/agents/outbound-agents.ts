/**
 * Queries of outbound agents, their versions and conversations (interface spec: Outbound agent
 * conversation). Every query is scoped to the workspace.
 */
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import type {
  AgentSlot,
  Assessment,
  Conversation,
  Draft,
  Finding,
  JudgeVerdict,
  MessageKind,
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
    if (seen.has(slot.slot_key))
      throw new ApiError('conflict', `The slot key "${slot.slot_key}" appears twice; each slot has one prompt.`);
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
  return sql.begin<OutboundAgent>(async (tx) => {
    const [agent] = await tx<{ id: string }[]>`
      insert into outbound_agents (workspace_id, name) values (${workspaceId}, ${body.name}) returning id`;
    await tx`
      insert into outbound_agent_versions (agent_id, version, instructions, slots, origin)
      values (${agent!.id}, 1, ${body.instructions}, ${tx.json(body.slots)}, 'created')`;
    return toAgent((await selectAgents(tx, workspaceId, agent!.id))[0]!);
  });
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
    values (${agentId}, ${agent!.version}, ${prompts.instructions}, ${tx.json(prompts.slots)}, ${origin})`;
  return agent!.version;
}

/**
 * Locks the agent's row alone; its current version is read after, in a statement of its own. A
 * locking read joined to the versions that waited on an edit re-reads only the agent's row: its new
 * version number would meet the old version row and the join would find nothing (a 404 for an edit
 * that arrived beside another).
 */
async function lockAgent(tx: Db, agentId: string, workspaceId?: string): Promise<boolean> {
  const rows = await tx`
    select 1 from outbound_agents where id = ${agentId} ${workspaceId ? tx`and workspace_id = ${workspaceId}` : tx``} for update`;
  return rows.length === 1;
}

/** A name change keeps the version; a change of instructions or slots makes a new version. */
export async function updateAgent(
  sql: Sql,
  workspaceId: string,
  agentId: string,
  body: OutboundAgentUpdate,
): Promise<OutboundAgent | undefined> {
  checkSlots(body.slots);
  return sql.begin<OutboundAgent | undefined>(async (tx) => {
    if (!(await lockAgent(tx, agentId, workspaceId))) return undefined;
    const [current] = await tx<AgentRecord[]>`
      select a.id, a.name, a.version, v.instructions, v.slots, a.created_at, a.updated_at
      from outbound_agents a join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
      where a.id = ${agentId}`;
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
  });
}

export async function listVersions(
  sql: Sql,
  workspaceId: string,
  agentId: string,
): Promise<OutboundAgentVersion[] | undefined> {
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

/** readOutboundConversation: the conversation of one contact with the agent, messages oldest first. */
export async function readConversation(
  sql: Sql,
  workspaceId: string,
  agentId: string,
  contactKey: string,
): Promise<Conversation | undefined> {
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
  const emptyVerdict = {
    grounded: false,
    language_ok: false,
    on_topic: false,
    safe: false,
    quality_score: 0,
    reasons: [],
  };
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

// ---------------------------------------------------------------------------------------------
// The agent's writing (writeStepMessage): the current version, the conversation researched once,
// and message rows claimed per (conversation, write key) by attempt.

export interface AgentVersionRecord {
  id: string;
  workspace_id: string;
  name: string;
  version: number;
  instructions: string;
  slots: AgentSlot[];
}

export async function loadAgentVersion(
  db: Db,
  workspaceId: string,
  agentId: string,
): Promise<AgentVersionRecord | undefined> {
  const [agent] = await db<AgentVersionRecord[]>`
    select a.id, a.workspace_id, a.name, a.version, v.instructions, v.slots
    from outbound_agents a join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
    where a.id = ${agentId} and a.workspace_id = ${workspaceId}`;
  return agent;
}

export interface ResearchedConversation {
  id: string;
  researched_at: Date | null;
  research_brief: ResearchFact[];
  sources: string[];
}

/** The conversation of (agent, contact key), created on first use. */
export async function openConversation(
  db: Db,
  c: { workspaceId: string; agentId: string; contactKey: string; subjectKey: string },
): Promise<ResearchedConversation> {
  const [conversation] = await db<ResearchedConversation[]>`
      insert into outbound_conversations (workspace_id, agent_id, contact_key, subject_key)
      values (${c.workspaceId}, ${c.agentId}, ${c.contactKey}, ${c.subjectKey})
      on conflict (agent_id, contact_key) do update set contact_key = excluded.contact_key
      returning id, researched_at, research_brief, sources`;
  return conversation!;
}

/** Stores the research brief once: undefined when another write researched the conversation first. */
export async function storeResearch(
  db: Db,
  conversationId: string,
  research: { brief: ResearchFact[]; sources: string[]; companyKey: string },
): Promise<ResearchedConversation | undefined> {
  const [updated] = await db<ResearchedConversation[]>`
      update outbound_conversations
      set research_brief = ${db.json(research.brief)}, sources = ${research.sources}, company_key = ${research.companyKey}, researched_at = now()
      where id = ${conversationId} and researched_at is null
      returning id, researched_at, research_brief, sources`;
  return updated;
}

export async function findResearchedConversation(
  db: Db,
  conversationId: string,
): Promise<ResearchedConversation | undefined> {
  return (
    await db<
      ResearchedConversation[]
    >`select id, researched_at, research_brief, sources from outbound_conversations where id = ${conversationId}`
  )[0];
}

export async function touchConversation(db: Db, conversationId: string): Promise<void> {
  await db`update outbound_conversations set last_turn_at = now() where id = ${conversationId}`;
}

export interface StoredMessage {
  id: string;
  attempt: number;
  status: string;
  subject: string | null;
  body: string;
  confident: boolean;
  insufficient_data: boolean;
  confidence: string;
  judge_verdict: Partial<JudgeVerdict>;
}

export async function findWrite(db: Db, conversationId: string, writeKey: string): Promise<StoredMessage | undefined> {
  const [stored] = await db<StoredMessage[]>`
        select * from outbound_messages where conversation_id = ${conversationId} and write_key = ${writeKey}`;
  return stored;
}

export async function findMessage(db: Db, messageId: string): Promise<StoredMessage | undefined> {
  return (await db<StoredMessage[]>`select * from outbound_messages where id = ${messageId}`)[0];
}

/** Claims the write: a new row, or the next attempt of a failed (or abandoned) one; undefined when it is written already. */
export async function claimWrite(
  db: Db,
  w: {
    workspaceId: string;
    conversationId: string;
    writeKey: string;
    agentVersion: number;
    slotKey: string;
    kind: MessageKind;
  },
): Promise<StoredMessage | undefined> {
  const [claimed] = await db<StoredMessage[]>`
        insert into outbound_messages (workspace_id, conversation_id, write_key, agent_version, slot_key, kind, status)
        values (${w.workspaceId}, ${w.conversationId}, ${w.writeKey}, ${w.agentVersion}, ${w.slotKey}, ${w.kind}, 'writing')
        on conflict (conversation_id, write_key) do update
          set attempt = outbound_messages.attempt + 1, status = 'writing', error = null, agent_version = excluded.agent_version
          where outbound_messages.status in ('failed', 'writing')
        returning *`;
  return claimed;
}

/** The conversation's other messages written so far, oldest first: what the writer is shown. */
export function writtenThread(db: Db, conversationId: string, writeKey: string) {
  return db<{ slot_key: string; subject: string | null; body: string }[]>`
        select slot_key, subject, body from outbound_messages
        where conversation_id = ${conversationId} and write_key <> ${writeKey} and status in ('ready', 'needs_review', 'sent')
        order by created_at, id`;
}

/** This attempt of the write failed (a newer attempt is left alone). */
export async function failWrite(db: Db, claimed: { id: string; attempt: number }, error: string): Promise<void> {
  await db`update outbound_messages set status = 'failed', error = ${error}
            where id = ${claimed.id} and attempt = ${claimed.attempt} and status = 'writing'`;
}

/** Stores this attempt's message; undefined when a newer attempt superseded it. */
export async function storeWrittenMessage(
  db: Db,
  claimed: { id: string; attempt: number },
  m: {
    draft: Draft;
    findings: Finding[];
    verdict: JudgeVerdict;
    assessment: Assessment;
    opensThread: boolean;
    modelKey: string;
    reach: 'web' | 'none';
    priceTenths: number;
    creditsCharged: number;
    status: 'needs_review' | 'ready';
  },
): Promise<StoredMessage | undefined> {
  const { draft, assessment, verdict } = m;
  const [row] = await db<StoredMessage[]>`
          update outbound_messages set
            angle = ${draft.angle}, subject = ${draft.subject}, body = ${draft.body},
            generated_subject = ${draft.subject}, generated_body = ${draft.body}, reasoning = ${draft.reasoning},
            facts_used = ${draft.facts_used}, findings = ${db.json(m.findings)}, judge_verdict = ${db.json(verdict)},
            confidence = ${assessment.confidence}, confidence_score = ${assessment.confidence_score}, confident = ${assessment.confident},
            insufficient_data = ${assessment.insufficient_data}, is_preview = false,
            opens_thread = ${m.opensThread}, model_key = ${m.modelKey}, reach = ${m.reach},
            price_tenths = ${m.priceTenths}, credits_charged = ${m.creditsCharged}, quality_score = ${verdict.quality_score},
            status = ${m.status}, error = null
          where id = ${claimed.id} and attempt = ${claimed.attempt} and status = 'writing'
          returning *`;
  return row;
}

/** An outbound agent's name and one version's instructions and slots. */
export async function agentAtVersion(db: Db, agentId: string, version: number) {
  const [agent] = await db<{ name: string; instructions: string; slots: AgentSlot[] }[]>`
    select a.name, v.instructions, v.slots from outbound_agents a
    join outbound_agent_versions v on v.agent_id = a.id and v.version = ${version}
    where a.id = ${agentId}`;
  return agent;
}

/** The agent's current version, its row locked so a new version is added on top of this one. */
export async function lockCurrentAgentVersion(tx: Db, agentId: string) {
  if (!(await lockAgent(tx, agentId))) return undefined;
  const [agent] = await tx<{ version: number; instructions: string; slots: AgentSlot[] }[]>`
    select a.version, v.instructions, v.slots from outbound_agents a
    join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
    where a.id = ${agentId}`;
  return agent;
}
