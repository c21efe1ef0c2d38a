/**
 * The outbound agent: versioned agents through the API, and the writing activity the sequence
 * contact workflow calls (writeStepMessage) run against the real database, with research reading
 * a local web site and the chat model pointed at a local chat-completions server: a good answer,
 * a malformed one and a 500. Without a model the local template writer writes, and says so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { getBalance } from '../../store/platform/credits.js';
import { createOutboundAgentActivities, type WriteStepMessageInput } from '../../activities/agents/outbound-agent.js';
import { randomUUID } from 'node:crypto';
import { serveChatCompletions } from '../support/local-servers.js';
import { workspaceWithCredits } from '../support/tables.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';

type Mode = 'good' | 'malformed' | 'error500' | 'ungrounded';
let mode: Mode = 'good';
let site: LocalHttp;
let model: Awaited<ReturnType<typeof serveChatCompletions>>;

beforeAll(async () => {
  site = await serveHttp((req, res) => {
    if (req.url === '/acme') {
      return void res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          '<title>Acme Robotics</title><meta name="description" content="Acme Robotics builds warehouse robots for mid-size retailers. Founded 2015."><p>Robots.</p>',
        );
    }
    res.writeHead(404).end();
  });
  model = await serveChatCompletions((body) => {
    const system = body.messages[0]!.content;
    if (mode === 'error500') return { status: 500 };
    if (system.includes('extract facts'))
      return { content: JSON.stringify({ facts: [{ category: 'industry', fact: 'Warehouse robotics', page: 1 }] }) };
    if (system.includes('You judge')) {
      return {
        content: JSON.stringify({
          grounded: true,
          language_ok: true,
          on_topic: true,
          safe: true,
          quality_score: 88,
          reasons: [],
        }),
      };
    }
    if (mode === 'malformed') return { content: 'Sure! Here is your email: Hi Dana...' };
    return {
      content: JSON.stringify({
        angle: 'role',
        subject: 'Scaling growth at Acme',
        body: 'Hi Dana,\n\nAs Head of Growth at Acme Robotics you probably juggle many channels. Would a short call help?',
        reasoning: 'Led with the role.',
        facts_used: mode === 'ungrounded' ? ['Dana won an award last week'] : ['Head of Growth', 'Acme Robotics'],
        confidence_score: 85,
      }),
    };
  });
});
afterAll(async () => {
  await site?.close();
  await model?.close();
});

const env = { WEB_READER_ALLOW_PRIVATE_NETWORKS: 'true' };
const { stack, paid } = useTestStack({ enrichmentProviders: () => createEnrichmentProviders({ env }) });

const chat = () =>
  openAiChatModel({ apiKey: 'local-key', model: 'local-model', baseUrl: `${model.url}/v1`, timeoutSeconds: 5 });
const activities = (withModel: boolean) =>
  createOutboundAgentActivities({
    sql: stack.sql,
    chatModel: withModel ? chat() : null,
    enrichmentProviders: createEnrichmentProviders({ env }),
  });

const workspaceWith = (credits: number) => workspaceWithCredits(stack, credits);

async function agentOf(ws: TestWorkspace, body: object = {}) {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/outbound-agents/',
    headers: withKey(ws.apiKey),
    payload: {
      name: 'Growth agent',
      instructions: 'We sell onboarding analytics.',
      slots: [
        { slot_key: 'opener', kind: 'email', prompt: 'Open with what they do and ask for a call.' },
        { slot_key: 'follow_up_1', kind: 'email', prompt: 'Nudge gently.' },
      ],
      ...body,
    },
  });
  expect(res.statusCode).toBe(201);
  return res.json<{ id: string; version: number }>();
}

const richContact = (): WriteStepMessageInput['contact'] => ({
  name: 'Dana Smith',
  email: 'dana@acme.example',
  fields: { Title: 'Head of Growth', Company: 'Acme Robotics', Website: `${site.url}/acme`, Location: 'Berlin' },
});

const input = (
  ws: TestWorkspace,
  agentId: string,
  over: Partial<WriteStepMessageInput> = {},
): WriteStepMessageInput => {
  const sequenceId = randomUUID();
  return {
    workspaceId: ws.workspaceId,
    agentId,
    sequenceId,
    contactKey: `${sequenceId}:${randomUUID()}`,
    slotKey: 'opener',
    kind: 'email',
    contact: richContact(),
    ...over,
  };
};

const conversation = (ws: TestWorkspace, agentId: string, contactKey: string) =>
  stack.app.inject({
    method: 'GET',
    url: `/outbound-agents/${agentId}/conversations/?contact_key=${encodeURIComponent(contactKey)}`,
    headers: withKey(ws.apiKey),
  });

describe('outbound agents', () => {
  it('versions an agent: a prompt change makes a new version, a rename does not, and old versions stay readable', async () => {
    const agent = await agentOf(paid);
    expect(agent.version).toBe(1);
    const patch = (payload: object) =>
      stack.app.inject({
        method: 'PATCH',
        url: `/outbound-agents/${agent.id}/`,
        headers: withKey(paid.apiKey),
        payload,
      });
    expect((await patch({ name: 'Renamed' })).json()).toMatchObject({ name: 'Renamed', version: 1 });
    const edited = (await patch({ slots: [{ slot_key: 'opener', prompt: 'Be brief.' }] })).json();
    expect(edited).toMatchObject({ version: 2, slots: [{ slot_key: 'opener', kind: 'email', prompt: 'Be brief.' }] });
    const versions = (
      await stack.app.inject({
        method: 'GET',
        url: `/outbound-agents/${agent.id}/versions/`,
        headers: withKey(paid.apiKey),
      })
    ).json().versions;
    expect(versions.map((v: { version: number; origin: string }) => [v.version, v.origin])).toEqual([
      [2, 'edited'],
      [1, 'created'],
    ]);
    expect(versions[1].slots).toHaveLength(2);
    const listed = (
      await stack.app.inject({ method: 'GET', url: '/outbound-agents/', headers: withKey(paid.apiKey) })
    ).json().agents;
    expect(listed.map((a: { id: string }) => a.id)).toContain(agent.id);
  });

  it('applies edits that arrive together one after another: each makes its own version, none is lost as not found', async () => {
    const agent = await agentOf(paid);
    const edits = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        stack.app.inject({
          method: 'PATCH',
          url: `/outbound-agents/${agent.id}/`,
          headers: withKey(paid.apiKey),
          payload: { slots: [{ slot_key: 'opener', prompt: `Edit ${i}.` }] },
        }),
      ),
    );
    expect(edits.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(edits.map((r) => r.json().version).sort((a: number, b: number) => a - b)).toEqual(
      [2, 3, 4, 5, 6, 7].map((v) => v + agent.version - 1),
    );
  });

  it('refuses a slot key given twice (409), an empty slot list and a bad slot key (422)', async () => {
    const post = (payload: object) =>
      stack.app.inject({
        method: 'POST',
        url: '/outbound-agents/',
        headers: withKey(paid.apiKey),
        payload: { name: 'A', ...payload },
      });
    const twice = await post({
      slots: [
        { slot_key: 'opener', prompt: 'a' },
        { slot_key: 'opener', prompt: 'b' },
      ],
    });
    expect(twice.statusCode).toBe(409);
    expect(twice.json().detail).toMatch(/twice/);
    expect((await post({ slots: [] })).statusCode).toBe(422);
    expect((await post({ slots: [{ slot_key: 'Opener!', prompt: 'a' }] })).statusCode).toBe(422);
  });

  it('sets and reads the agent of a sequence, and refuses an agent of another workspace', async () => {
    const agent = await agentOf(paid);
    const [sequence] = await stack.sql<
      { id: string }[]
    >`insert into sequences (workspace_id, name) values (${paid.workspaceId}, 'Seq') returning id`;
    const put = (ws: TestWorkspace, agentId: string | null) =>
      stack.app.inject({
        method: 'PUT',
        url: `/sequences/${sequence!.id}/agent/`,
        headers: withKey(ws.apiKey),
        payload: { agent_id: agentId },
      });
    expect((await put(paid, agent.id)).json()).toEqual({ sequence_id: sequence!.id, agent_id: agent.id });
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: `/sequences/${sequence!.id}/agent/`,
          headers: withKey(paid.apiKey),
        })
      ).json().agent_id,
    ).toBe(agent.id);
    const otherAgent = await agentOf(await workspaceWith(0));
    expect((await put(paid, otherAgent.id)).statusCode).toBe(404);
    expect((await put(paid, null)).json().agent_id).toBeNull();
  });
});

describe('writing a step message', () => {
  it('without a model, the local template writer composes from the research, says so, and charges nothing', async () => {
    const ws = await workspaceWith(10);
    const agent = await agentOf(ws);
    const call = input(ws, agent.id);
    const result = await activities(false).writeStepMessage(call);
    expect(result.needsReview).toBe(false);
    expect(result.subject).toBe('A question for Acme Robotics');
    expect(result.body).toContain('Hi Dana,');
    expect(result.body).toContain('Head of Growth at Acme Robotics');
    const read = (await conversation(ws, agent.id, call.contactKey)).json();
    const [message] = read.messages;
    expect(message).toMatchObject({
      model_key: 'local-template-writer',
      reach: 'web',
      price_tenths: 0,
      credits_charged: 0,
      status: 'ready',
      angle: 'role',
      slot_key: 'opener',
      kind: 'email',
      opens_thread: true,
      is_preview: false,
      insufficient_data: false,
      confident: true,
      judge_verdict: { grounded: true, language_ok: true, on_topic: true, safe: true },
      facts_used: ['Head of Growth', 'Acme Robotics'],
    });
    // Research: the row's facts and the company page read through the page reader, each with its source.
    expect(read.research_brief).toEqual(
      expect.arrayContaining([
        { category: 'role', fact: 'Head of Growth', source_title: 'Contact row', source_url: null },
        { category: 'company', fact: 'Acme Robotics', source_title: 'Contact row', source_url: null },
        {
          category: 'company',
          fact: 'Acme Robotics builds warehouse robots for mid-size retailers.',
          source_title: 'Acme Robotics',
          source_url: `${site.url}/acme`,
        },
      ]),
    );
    expect(read.sources).toEqual([`${site.url}/acme`]);
    expect(read.subject_key).toBe('dana@acme.example');
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 10, held: 0, spent: 0 });
  });

  it('holds a contact with too little research for a person (insufficient_data), with low confidence', async () => {
    const agent = await agentOf(paid);
    const call = input(paid, agent.id, { contact: { name: 'Sam', fields: {} } });
    const result = await activities(false).writeStepMessage(call);
    expect(result).toMatchObject({ needsReview: true, reason: 'insufficient_data' });
    const [message] = (await conversation(paid, agent.id, call.contactKey)).json().messages;
    expect(message).toMatchObject({
      status: 'needs_review',
      insufficient_data: true,
      confident: false,
      confidence: 'low',
      reach: 'none',
    });
  });

  it('writes through the chat model, judges it, and charges its price once even when retried', async () => {
    const ws = await workspaceWith(10);
    const agent = await agentOf(ws);
    mode = 'good';
    const acts = activities(true);
    const call = input(ws, agent.id);
    const first = await acts.writeStepMessage(call);
    const again = await acts.writeStepMessage(call);
    expect(again).toEqual(first);
    expect(first).toMatchObject({ needsReview: false, reason: null, subject: 'Scaling growth at Acme' });
    const read = (await conversation(ws, agent.id, call.contactKey)).json();
    expect(read.messages).toHaveLength(1);
    expect(read.messages[0]).toMatchObject({
      model_key: 'local-model',
      price_tenths: 20,
      credits_charged: 2,
      status: 'ready',
      confidence: 'high',
      generated_body: read.messages[0].body,
      judge_verdict: { grounded: true, quality_score: 88 },
    });
    // The model added a fact from the page it was shown, sourced to that page.
    expect(read.research_brief).toContainEqual({
      category: 'industry',
      fact: 'Warehouse robotics',
      source_title: 'Acme Robotics',
      source_url: `${site.url}/acme`,
    });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 8, held: 0, spent: 2 });
  });

  it('flags a message whose facts are not in the brief (judge: not grounded) for review', async () => {
    const agent = await agentOf(paid);
    mode = 'ungrounded';
    const call = input(paid, agent.id);
    const result = await activities(true).writeStepMessage(call);
    mode = 'good';
    expect(result).toMatchObject({ needsReview: true, reason: 'judge_failed' });
    const [message] = (await conversation(paid, agent.id, call.contactKey)).json().messages;
    expect(message.judge_verdict.grounded).toBe(false);
    expect(message.findings).toContainEqual(
      expect.objectContaining({ code: 'ungrounded_fact', excerpt: 'Dana won an award last week', severity: 'error' }),
    );
  });

  it('a malformed model answer is a retryable failure that charges nothing; the retry writes and charges once', async () => {
    const ws = await workspaceWith(10);
    const agent = await agentOf(ws);
    const acts = activities(true);
    const call = input(ws, agent.id);
    mode = 'malformed';
    await expect(acts.writeStepMessage(call)).rejects.toMatchObject({ type: 'model_failed', nonRetryable: false });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 10, held: 0, spent: 0 });
    const failed = (await conversation(ws, agent.id, call.contactKey)).json().messages;
    expect(failed).toMatchObject([{ status: 'failed', credits_charged: 0 }]);
    expect(failed[0].error).toMatch(/did not answer with the message JSON/);
    mode = 'good';
    await acts.writeStepMessage(call);
    await acts.writeStepMessage(call);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 8, held: 0, spent: 2 });
    expect((await conversation(ws, agent.id, call.contactKey)).json().messages).toMatchObject([
      { status: 'ready', error: null, credits_charged: 2 },
    ]);
  });

  it('a 500 from the model API is a retryable failure that charges nothing', async () => {
    const ws = await workspaceWith(10);
    const agent = await agentOf(ws);
    mode = 'error500';
    const call = input(ws, agent.id);
    const failure = await activities(true)
      .writeStepMessage(call)
      .catch((e: unknown) => e);
    mode = 'good';
    expect(failure).toMatchObject({ type: 'model_failed', nonRetryable: false });
    expect((failure as Error).message).toMatch(/500/);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 10, held: 0, spent: 0 });
    const ledger =
      await stack.sql`select kind from credit_ledger where workspace_id = ${ws.workspaceId} and kind = 'charge'`;
    expect(ledger).toHaveLength(0);
  });

  it('refuses a model write the workspace cannot pay for, before the model is asked', async () => {
    const ws = await workspaceWith(1);
    const agent = await agentOf(ws);
    const asked = model.requests.length;
    await expect(
      activities(true).writeStepMessage(
        input(ws, agent.id, { contact: { name: 'Lee', fields: { Title: 'CTO', Company: 'Initech' } } }),
      ),
    ).rejects.toMatchObject({
      type: 'insufficient_credits',
      nonRetryable: true,
    });
    expect(model.requests.length).toBe(asked);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 1, held: 0, spent: 0 });
  });
});
