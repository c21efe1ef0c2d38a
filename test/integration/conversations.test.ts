/**
 * readOutboundConversation: GET /outbound-agents/{agent_id}/conversations/?contact_key=... reads
 * what the agent found out about one contact and every message it wrote, oldest first. Messages are
 * written by the same activity the sequence contact workflow calls (local template writer: no
 * model).
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createOutboundAgentActivities } from '../../activities/agents/outbound-agent.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let agentId: string;
beforeAll(async () => {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/outbound-agents/',
    headers: withKey(paid.apiKey),
    payload: {
      name: 'Agent',
      slots: [
        { slot_key: 'opener', kind: 'email', prompt: 'Introduce the product.' },
        { slot_key: 'follow_up_1', kind: 'email', prompt: 'Follow up.' },
        { slot_key: 'note', kind: 'connection_note', prompt: 'Ask to connect.' },
      ],
    },
  });
  agentId = res.json().id;
});

const read = (contactKey: string | null, agent = agentId, ws = paid) =>
  stack.app.inject({
    method: 'GET',
    url: `/outbound-agents/${agent}/conversations/${contactKey === null ? '' : `?contact_key=${encodeURIComponent(contactKey)}`}`,
    headers: withKey(ws.apiKey),
  });

async function write(contactKey: string, slotKey: string, kind: 'email' | 'connection_note' = 'email') {
  const acts = createOutboundAgentActivities({ sql: stack.sql, chatModel: null });
  return acts.writeStepMessage({
    workspaceId: paid.workspaceId,
    agentId,
    sequenceId: randomUUID(),
    contactKey,
    slotKey,
    kind,
    contact: {
      name: 'Ada Lovelace',
      email: 'ada@engines.example',
      fields: { Title: 'Analyst', Company: 'Engines Ltd', Industry: 'Computing' },
    },
  });
}

describe('readOutboundConversation: the conversation read', () => {
  it('returns the research and every message, oldest first, each with every field of the interface spec', async () => {
    const key = `${randomUUID()}:${randomUUID()}`;
    const opener = await write(key, 'opener');
    const followUp = await write(key, 'follow_up_1');
    const note = await write(key, 'note', 'connection_note');
    const res = await read(key);
    expect(res.statusCode).toBe(200);
    const conversation = res.json();
    expect(conversation).toMatchObject({
      company_key: 'engines.example',
      subject_key: 'ada@engines.example',
      sources: [],
    });
    expect(conversation.research_brief.map((f: { category: string }) => f.category)).toEqual([
      'role',
      'company',
      'industry',
      'website',
    ]);
    expect(conversation.messages.map((m: { id: string }) => m.id)).toEqual([
      opener.messageId,
      followUp.messageId,
      note.messageId,
    ]);
    expect(conversation.messages.map((m: { opens_thread: boolean }) => m.opens_thread)).toEqual([true, false, false]);
    const [first, second, third] = conversation.messages;
    expect(second.subject).toBe(`Re: ${first.subject}`);
    expect(second.body).toMatch(/^Hi Ada,\n\nFollowing up on my earlier note\./);
    expect(third).toMatchObject({ kind: 'connection_note', subject: null });
    expect(third.body.length).toBeLessThanOrEqual(300);
    expect(Object.keys(first).sort()).toEqual(
      [
        'id',
        'conversation_id',
        'agent_version',
        'angle',
        'slot_key',
        'kind',
        'subject',
        'body',
        'generated_subject',
        'generated_body',
        'reasoning',
        'facts_used',
        'findings',
        'judge_verdict',
        'confidence',
        'confidence_score',
        'confident',
        'insufficient_data',
        'is_preview',
        'opens_thread',
        'model_key',
        'reach',
        'price_tenths',
        'credits_charged',
        'quality_score',
        'status',
        'error',
        'created_at',
        'sent_at',
      ].sort(),
    );
    expect(first).toMatchObject({ conversation_id: conversation.id, agent_version: 1, sent_at: null, error: null });
    expect(Date.parse(conversation.last_turn_at)).toBeGreaterThanOrEqual(Date.parse(conversation.researched_at));
  });

  it('takes a contact key of 255 characters and refuses 256 with 422', async () => {
    const longest = 'k'.repeat(255);
    await write(longest, 'opener');
    const ok = await read(longest);
    expect(ok.statusCode).toBe(200);
    expect(ok.json().subject_key).toBe('ada@engines.example');
    const tooLong = await read('k'.repeat(256));
    expect(tooLong.statusCode).toBe(422);
    expect(tooLong.json().issues[0]).toMatchObject({ loc: ['query', 'contact_key'] });
  });

  it('refuses a missing or empty contact key with 422', async () => {
    expect((await read(null)).statusCode).toBe(422);
    expect((await read('')).statusCode).toBe(422);
  });

  it('refuses a contact key holding a NUL character with 422 naming the parameter (Postgres cannot store one)', async () => {
    const withNul = await read('k\u0000k');
    expect(withNul.statusCode).toBe(422);
    expect(withNul.json().issues[0]).toMatchObject({ loc: ['query', 'contact_key'] });
  });

  it('answers 404 for a contact the agent never wrote to, an unknown agent, and another workspace', async () => {
    const unknown = await read(`${randomUUID()}:${randomUUID()}`);
    expect(unknown.statusCode).toBe(404);
    expect(Object.keys(unknown.json())).toEqual(['detail']);
    expect((await read('k'.repeat(255), randomUUID())).statusCode).toBe(404);
    const intruder = await stack.createWorkspace('paid');
    expect((await read('k'.repeat(255), agentId, intruder)).statusCode).toBe(404);
  });
});
