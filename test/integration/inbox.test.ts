import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { insertMessage, refreshThread, upsertThread } from '../../store/inbox/messages.js';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { bulkThreadsMax } from '../../domain/inbox/inbox.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import { serveChatCompletions } from '../support/local-servers.js';
import { type LocalHttp } from '../../sim/local-http.js';
import { connectedAccount } from '../support/pnet.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';
import { smtpMailer, Mailer } from '../../integrations/mailer.js';
import { startSmtpServer } from '../support/sequences.js';
import { testIntegrations } from '../support/integrations.js';

const { stack, paid } = useTestStack();

let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let chat: LocalHttp;
let failingChat: LocalHttp;
/** Apps on the stack's database and Temporal, differing only in their mailer and chat model. */
let templateApp: FastifyInstance;
let modelApp: FastifyInstance;
let failingModelApp: FastifyInstance;
let failNextSend = false;

beforeAll(async () => {
  smtp = await startSmtpServer();
  chat = await serveChatCompletions(() => ({ content: 'Hi Ada,\n\nHappy to talk on Tuesday.\n\nBest' }));
  failingChat = await serveChatCompletions(() => ({ status: 500 }));
  const real = smtpMailer(smtp.url, { from: 'sequences@ours.example' });
  const mailer: Mailer = {
    defaultFrom: real.defaultFrom,
    domain: real.domain,
    async send(email) {
      if (failNextSend) {
        failNextSend = false;
        throw new Error('451 try again later');
      }
      return real.send(email);
    },
  };
  const verifyToken = createTokenVerifier(await resolveTokenConfig(stack.sql, {}));
  const app = async (chatModel: ReturnType<typeof openAiChatModel> | null) => {
    const built = await buildApp({
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue: stack.taskQueue },
      verifyToken,
      rateLimit: { limit: 0, windowSeconds: 60 },
      integrations: testIntegrations({ mailer, chatModel }),
    });
    await built.ready();
    return built;
  };
  templateApp = await app(null);
  modelApp = await app(openAiChatModel({ apiKey: 'local', model: 'local-chat-1', baseUrl: `${chat.url}/v1` }));
  failingModelApp = await app(
    openAiChatModel({ apiKey: 'local', model: 'local-chat-1', baseUrl: `${failingChat.url}/v1` }),
  );
});
afterAll(async () => {
  await Promise.all([templateApp?.close(), modelApp?.close(), failingModelApp?.close()]);
  await Promise.all([smtp?.close(), chat?.close(), failingChat?.close()]);
});

const call = (
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  payload?: object,
  ws: TestWorkspace = paid,
  app: FastifyInstance = templateApp,
) => app.inject({ method, url, headers: withKey(ws.apiKey), ...(payload ? { payload } : {}) });

interface Seed {
  channel?: 'email' | 'pnet';
  email?: string | null;
  profileUrl?: string | null;
  name?: string;
  subject?: string;
  ourAddress?: string;
  pnetAccountId?: string;
  /** Oldest first; minutes ago. */
  messages?: {
    direction: 'inbound' | 'outbound';
    kind?: 'reply' | 'sent' | 'bounce' | 'auto_reply';
    body: string;
    minutesAgo: number;
  }[];
}

/** A thread with messages, written the way the inbound paths write them. */
async function seed(ws: TestWorkspace, s: Seed): Promise<string> {
  return stack.sql.begin(async (tx) => {
    const threadId = await upsertThread(
      tx,
      {
        workspaceId: ws.workspaceId,
        channel: s.channel ?? 'email',
        externalKey: `<${crypto.randomUUID()}@seed>`,
        subject: s.subject ?? 'Hello',
        contactEmail: s.email,
        contactProfileUrl: s.profileUrl,
        contactName: s.name ?? null,
        ourAddress: s.ourAddress ?? null,
        pnetAccountId: s.pnetAccountId ?? null,
      },
      false,
    );
    for (const m of s.messages ?? [{ direction: 'inbound' as const, body: 'Tell me more?', minutesAgo: 1 }]) {
      await insertMessage(tx, {
        workspaceId: ws.workspaceId,
        threadId,
        direction: m.direction,
        kind: m.kind ?? (m.direction === 'inbound' ? 'reply' : 'sent'),
        fromEmail: m.direction === 'inbound' ? s.email : null,
        fromProfileUrl: m.direction === 'inbound' ? s.profileUrl : null,
        body: m.body,
        externalId: `<${crypto.randomUUID()}@seed>`,
        occurredAt: new Date(Date.now() - m.minutesAgo * 60_000),
      });
    }
    await refreshThread(
      tx,
      threadId,
      (s.messages ?? [{ direction: 'inbound' }]).some((m) => m.direction === 'inbound'),
    );
    return threadId;
  });
}

const ids = (res: { json: () => { threads: { id: string }[] } }) => res.json().threads.map((t) => t.id);

describe('threads', () => {
  it('lists threads across channels, newest activity first, filtered by channel, unread, needs-reply and text', async () => {
    const ws = await stack.createWorkspace('paid');
    const old = await seed(ws, {
      email: 'old@x.example',
      name: 'Old Timer',
      messages: [{ direction: 'inbound', body: 'old', minutesAgo: 60 }],
    });
    const pnet = await seed(ws, {
      channel: 'pnet',
      profileUrl: 'https://pnet.example/in/p1',
      messages: [{ direction: 'inbound', body: 'hi from pnet', minutesAgo: 5 }],
    });
    const answered = await seed(ws, {
      email: 'done@x.example',
      messages: [
        { direction: 'inbound', body: 'question', minutesAgo: 20 },
        { direction: 'outbound', body: 'answer', minutesAgo: 10 },
      ],
    });
    expect(ids(await call('GET', '/inbox/threads/', undefined, ws))).toEqual([pnet, answered, old]);
    expect(ids(await call('GET', '/inbox/threads/?channel=pnet', undefined, ws))).toEqual([pnet]);
    expect(ids(await call('GET', '/inbox/threads/?needs_reply=true', undefined, ws))).toEqual([pnet, old]);
    expect(ids(await call('GET', '/inbox/threads/?needs_reply=false', undefined, ws))).toEqual([answered]);
    expect(ids(await call('GET', '/inbox/threads/?search=timer', undefined, ws))).toEqual([old]);
    await call('PATCH', `/inbox/threads/${old}/`, { unread: false }, ws);
    expect(ids(await call('GET', '/inbox/threads/?unread=true', undefined, ws))).toEqual([pnet, answered]);
    expect(ids(await call('GET', '/inbox/threads/?unread=false', undefined, ws))).toEqual([old]);
    const page = (await call('GET', '/inbox/threads/?limit=2', undefined, ws)).json();
    expect(page).toMatchObject({ total: 3, next_offset: 2 });
    expect((await call('GET', '/inbox/threads/?limit=2&offset=2', undefined, ws)).json()).toMatchObject({
      next_offset: null,
      threads: [{ id: old }],
    });
    expect((await call('GET', '/inbox/threads/?limit=0', undefined, ws)).statusCode).toBe(422);
    expect((await call('GET', '/inbox/threads/?limit=100', undefined, ws)).statusCode).toBe(200);
    expect((await call('GET', '/inbox/threads/?limit=101', undefined, ws)).statusCode).toBe(422);
    expect((await call('GET', '/inbox/threads/?channel=fax', undefined, ws)).statusCode).toBe(422);
  });

  it('reads a thread with its messages oldest first', async () => {
    const id = await seed(paid, {
      email: 'read@x.example',
      messages: [
        { direction: 'outbound', body: 'first', minutesAgo: 30 },
        { direction: 'inbound', body: 'second', minutesAgo: 20 },
        { direction: 'inbound', body: 'third', minutesAgo: 10 },
      ],
    });
    const t = (await call('GET', `/inbox/threads/${id}/`)).json();
    expect(t.messages.map((m: { body: string }) => m.body)).toEqual(['first', 'second', 'third']);
    expect(t).toMatchObject({
      message_count: 3,
      snippet: 'third',
      unread: true,
      needs_reply: true,
      archived: false,
      labels: [],
    });
    expect((await call('GET', `/inbox/threads/${crypto.randomUUID()}/`)).statusCode).toBe(404);
  });

  it('marks read and unread, archives, and a new inbound message brings an archived thread back', async () => {
    const id = await seed(paid, { email: 'arch@x.example' });
    expect((await call('PATCH', `/inbox/threads/${id}/`, { unread: false })).json()).toMatchObject({ unread: false });
    expect((await call('PATCH', `/inbox/threads/${id}/`, { unread: true })).json()).toMatchObject({ unread: true });
    expect((await call('PATCH', `/inbox/threads/${id}/`, { archived: true })).json()).toMatchObject({
      archived: true,
      unread: true,
    });
    expect(ids(await call('GET', '/inbox/threads/?limit=100'))).not.toContain(id);
    expect(ids(await call('GET', '/inbox/threads/?archived=true&limit=100'))).toContain(id);
    await stack.sql.begin(async (tx) => {
      await insertMessage(tx, {
        workspaceId: paid.workspaceId,
        threadId: id,
        direction: 'inbound',
        kind: 'reply',
        fromEmail: 'arch@x.example',
        body: 'back',
        externalId: '<back@x>',
        occurredAt: new Date(),
      });
      await refreshThread(tx, id, true);
    });
    expect((await call('GET', `/inbox/threads/${id}/`)).json()).toMatchObject({
      archived: false,
      unread: true,
      snippet: 'back',
    });
  });
});

describe('labels', () => {
  it('creates, renames, puts on and takes off threads, filters by them, and deletes', async () => {
    const ws = await stack.createWorkspace('paid');
    const hot = await call('POST', '/inbox/labels/', { name: 'Hot', color: '#ff0000' }, ws);
    expect(hot.statusCode).toBe(201);
    expect((await call('POST', '/inbox/labels/', { name: 'Hot' }, ws)).statusCode).toBe(409);
    const later = (await call('POST', '/inbox/labels/', { name: 'Later' }, ws)).json();
    expect(
      (await call('GET', '/inbox/labels/', undefined, ws)).json().labels.map((l: { name: string }) => l.name),
    ).toEqual(['Hot', 'Later']);
    expect((await call('PATCH', `/inbox/labels/${later.id}/`, { name: 'Hot' }, ws)).statusCode).toBe(409);
    expect(
      (await call('PATCH', `/inbox/labels/${later.id}/`, { name: 'Someday', color: null }, ws)).json(),
    ).toMatchObject({ name: 'Someday', color: null });

    const [a, b] = [await seed(ws, { email: 'a@l.example' }), await seed(ws, { email: 'b@l.example' })];
    const labelled = await call('POST', `/inbox/threads/${a}/labels/`, { label_id: hot.json().id }, ws);
    expect(labelled.json().labels).toEqual([hot.json()]);
    expect(
      (await call('POST', `/inbox/threads/${a}/labels/`, { label_id: hot.json().id }, ws)).json().labels,
    ).toHaveLength(1);
    expect(ids(await call('GET', `/inbox/threads/?label_id=${hot.json().id}`, undefined, ws))).toEqual([a]);
    const other = await stack.createWorkspace('paid');
    const foreign = (await call('POST', '/inbox/labels/', { name: 'Theirs' }, other)).json();
    expect((await call('POST', `/inbox/threads/${b}/labels/`, { label_id: foreign.id }, ws)).statusCode).toBe(404);
    expect((await call('DELETE', `/inbox/threads/${a}/labels/${hot.json().id}/`, undefined, ws)).json().labels).toEqual(
      [],
    );
    await call('POST', `/inbox/threads/${b}/labels/`, { label_id: later.id }, ws);
    expect((await call('DELETE', `/inbox/labels/${later.id}/`, undefined, ws)).statusCode).toBe(204);
    expect((await call('GET', `/inbox/threads/${b}/`, undefined, ws)).json().labels).toEqual([]);
    expect((await call('POST', '/inbox/labels/', { name: 'x'.repeat(101) }, ws)).statusCode).toBe(422);
    expect((await call('POST', '/inbox/labels/', { name: 'Bad colour', color: 'red' }, ws)).statusCode).toBe(422);
  });
});

describe('replies', () => {
  it('sends an email reply from our address, threaded, with its Message-ID recorded; the same idempotency key never sends twice', async () => {
    const id = await seed(paid, {
      email: 'ada@them.example',
      name: 'Ada',
      subject: 'Pricing',
      ourAddress: 'me@ours.example',
    });
    const before = smtp.received.length;
    const res = await call('POST', `/inbox/threads/${id}/replies/`, {
      body: 'Here are our prices.',
      idempotency_key: 'reply-1',
    });
    expect(res.statusCode).toBe(201);
    const message = res.json();
    expect(message).toMatchObject({
      direction: 'outbound',
      kind: 'sent',
      delivery_status: 'sent',
      to_email: 'ada@them.example',
      from_email: 'me@ours.example',
      subject: 'Re: Pricing',
    });
    expect(smtp.received.length).toBe(before + 1);
    const mail = smtp.received.at(-1)!;
    expect(mail.messageId).toBe(message.external_id);
    expect(mail.text?.trim()).toBe('Here are our prices.');
    const thread = (await call('GET', `/inbox/threads/${id}/`)).json();
    expect(mail.inReplyTo).toBe(thread.messages[0].external_id);
    expect(thread).toMatchObject({ needs_reply: false, unread: false, message_count: 2 });

    const again = await call('POST', `/inbox/threads/${id}/replies/`, {
      body: 'Here are our prices.',
      idempotency_key: 'reply-1',
    });
    expect(again.statusCode).toBe(200);
    expect(again.json().id).toBe(message.id);
    expect(smtp.received.length).toBe(before + 1);
  });

  it('a refused send is 502 and a retry with the same key sends the same Message-ID', async () => {
    const id = await seed(paid, { email: 'retry@them.example', ourAddress: 'me@ours.example' });
    failNextSend = true;
    const refused = await call('POST', `/inbox/threads/${id}/replies/`, { body: 'Try', idempotency_key: 'k-retry' });
    expect(refused.statusCode).toBe(502);
    const failed = (await call('GET', `/inbox/threads/${id}/`)).json().messages.at(-1);
    expect(failed).toMatchObject({ delivery_status: 'failed', delivery_error: expect.stringContaining('451') });
    const retried = await call('POST', `/inbox/threads/${id}/replies/`, { body: 'Try', idempotency_key: 'k-retry' });
    expect(retried.json()).toMatchObject({ id: failed.id, delivery_status: 'sent', external_id: failed.external_id });
    expect(smtp.received.at(-1)!.messageId).toBe(failed.external_id);
  });

  it('uses the workspace reply address when the thread names none, and says so when there is none', async () => {
    const ws = await stack.createWorkspace('paid');
    const id = await seed(ws, { email: 'nofrom@them.example' });
    const refused = await call('POST', `/inbox/threads/${id}/replies/`, { body: 'Hello' }, ws);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toContain('reply_from_address');
    expect(
      (
        await call(
          'PATCH',
          '/inbox/settings/',
          { reply_from_address: 'Team@Ours.example', reply_from_name: 'The Team' },
          ws,
        )
      ).json(),
    ).toMatchObject({ reply_from_address: 'team@ours.example' });
    expect((await call('POST', `/inbox/threads/${id}/replies/`, { body: 'Hello' }, ws)).json()).toMatchObject({
      from_email: 'team@ours.example',
      delivery_status: 'sent',
    });
    expect(smtp.received.at(-1)!.from?.value[0]).toMatchObject({ address: 'team@ours.example', name: 'The Team' });
  });

  it('bounds a reply at 1 to 8000 characters', async () => {
    const id = await seed(paid, { email: 'bounds@them.example', ourAddress: 'me@ours.example' });
    expect((await call('POST', `/inbox/threads/${id}/replies/`, { body: '' })).statusCode).toBe(422);
    expect((await call('POST', `/inbox/threads/${id}/replies/`, { body: 'x'.repeat(8001) })).statusCode).toBe(422);
    expect((await call('POST', `/inbox/threads/${id}/replies/`, { body: 'x'.repeat(8000) })).statusCode).toBe(201);
  });

  it('replies on pnet as a send_message step of the conversation’s sender account', async () => {
    const account = await connectedAccount(stack, paid);
    const id = await seed(paid, {
      channel: 'pnet',
      profileUrl: 'https://pnet.example/in/pnet-reply',
      pnetAccountId: account.accountId,
    });
    const res = await call('POST', `/inbox/threads/${id}/replies/`, { body: 'Thanks for connecting!' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ delivery_status: 'queued', direction: 'outbound' });
    const [step] = await stack.sql<{ kind: string; params: { profile_url: string; body: string }; status: string }[]>`
      select s.kind, s.params, s.status from browser_steps s join inbox_messages m on m.browser_step_id = s.id where m.id = ${res.json().id}`;
    expect(step).toMatchObject({
      kind: 'send_message',
      status: 'queued',
      params: { profile_url: 'https://pnet.example/in/pnet-reply', body: 'Thanks for connecting!' },
    });
  });
});

describe('suggested replies', () => {
  const balance = async (ws: TestWorkspace) =>
    (
      await stack.sql<
        { available: number }[]
      >`select available from credit_balances where workspace_id = ${ws.workspaceId}`
    )[0]!.available;

  it('without a model, the local template writer suggests for free and says so; asking again answers the same one', async () => {
    const id = await seed(paid, {
      email: 'tpl@them.example',
      name: 'Ada Lovelace',
      subject: 'Intro',
      messages: [{ direction: 'inbound', body: 'Could we schedule a call?', minutesAgo: 1 }],
    });
    const before = await balance(paid);
    const res = await call('POST', `/inbox/threads/${id}/suggestions/`);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      status: 'pending',
      model_key: 'local-template-writer',
      credits_charged: 0,
      subject: 'Re: Intro',
      thread_id: id,
    });
    expect(res.json().body).toContain('Hi Ada,');
    expect(await balance(paid)).toBe(before);
    const again = await call('POST', `/inbox/threads/${id}/suggestions/`);
    expect(again.statusCode).toBe(200);
    expect(again.json().id).toBe(res.json().id);
    expect(
      (await call('GET', `/inbox/suggestions/?thread_id=${id}`)).json().suggestions.map((s: { id: string }) => s.id),
    ).toEqual([res.json().id]);
  });

  it('with a model, charges one credit for the written suggestion, and nothing when the model fails', async () => {
    const ws = await stack.createWorkspace('paid');
    await stack.sql`insert into credit_balances (workspace_id, available) values (${ws.workspaceId}, 10) on conflict (workspace_id) do update set available = 10`;
    const failing = await seed(ws, {
      email: 'fail@them.example',
      messages: [{ direction: 'inbound', body: 'Hello?', minutesAgo: 1 }],
    });
    const failed = await call('POST', `/inbox/threads/${failing}/suggestions/`, undefined, ws, failingModelApp);
    expect(failed.statusCode).toBe(502);
    expect(await balance(ws)).toBe(10);
    expect((await call('GET', '/inbox/suggestions/', undefined, ws)).json().suggestions).toEqual([]);

    const id = await seed(ws, {
      email: 'model@them.example',
      name: 'Ada',
      messages: [{ direction: 'inbound', body: 'Tuesday works?', minutesAgo: 1 }],
    });
    const res = await call('POST', `/inbox/threads/${id}/suggestions/`, undefined, ws, modelApp);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      model_key: 'local-chat-1',
      credits_charged: 1,
      body: 'Hi Ada,\n\nHappy to talk on Tuesday.\n\nBest',
    });
    expect(await balance(ws)).toBe(9);
    expect((await call('POST', `/inbox/threads/${id}/suggestions/`, undefined, ws, modelApp)).statusCode).toBe(200);
    expect(await balance(ws)).toBe(9);
  });

  it("reads the workspace's business context (included ready summaries) in the suggestion's prompt, and not an excluded one", async () => {
    const ws = await stack.createWorkspace('paid');
    await stack.sql`insert into credit_balances (workspace_id, available) values (${ws.workspaceId}, 10) on conflict (workspace_id) do update set available = 10`;
    await stack.sql`
      insert into business_documents (workspace_id, source, status, title, filename, content_type, size_bytes, summary, summary_generated_at, included_in_context)
      values (${ws.workspaceId}, 'upload', 'ready', 'Price list', 'prices.md', 'text/markdown', 10, 'We sell the Gizmo Pro at 40 EUR a seat.', now(), true),
             (${ws.workspaceId}, 'upload', 'ready', 'Old deck', 'old.md', 'text/markdown', 10, 'Retired offer: the Widget Classic.', now(), false)`;
    const id = await seed(ws, {
      email: 'context@them.example',
      name: 'Ada',
      messages: [{ direction: 'inbound', body: 'What does it cost?', minutesAgo: 1 }],
    });
    const res = await call('POST', `/inbox/threads/${id}/suggestions/`, undefined, ws, modelApp);
    expect(res.statusCode).toBe(201);
    const system = (JSON.parse(chat.requests.at(-1)!.body) as { messages: { role: string; content: string }[] })
      .messages[0]!.content;
    expect(system).toContain('### Price list\nWe sell the Gizmo Pro at 40 EUR a seat.');
    expect(system).not.toContain('Widget Classic');
  });

  it('approves after an edit (sending the edit), refuses a second decision, and dismisses without sending', async () => {
    const id = await seed(paid, {
      email: 'approve@them.example',
      ourAddress: 'me@ours.example',
      messages: [{ direction: 'inbound', body: 'Interested.', minutesAgo: 1 }],
    });
    const suggestion = (await call('POST', `/inbox/threads/${id}/suggestions/`)).json();
    const approved = await call('POST', `/inbox/suggestions/${suggestion.id}/approve/`, { body: 'My own words.' });
    expect(approved.statusCode).toBe(200);
    expect(approved.json().suggestion).toMatchObject({
      status: 'approved',
      edited: true,
      body: 'My own words.',
      sent_message_id: approved.json().message.id,
    });
    expect(approved.json().message).toMatchObject({ delivery_status: 'sent', body: 'My own words.' });
    expect(smtp.received.at(-1)!.text?.trim()).toBe('My own words.');
    expect((await call('POST', `/inbox/suggestions/${suggestion.id}/approve/`, {})).statusCode).toBe(409);
    expect((await call('POST', `/inbox/suggestions/${suggestion.id}/dismiss/`)).statusCode).toBe(409);

    const other = await seed(paid, {
      email: 'dismiss@them.example',
      messages: [{ direction: 'inbound', body: 'Not now.', minutesAgo: 1 }],
    });
    const second = (await call('POST', `/inbox/threads/${other}/suggestions/`)).json();
    const sentBefore = smtp.received.length;
    expect((await call('POST', `/inbox/suggestions/${second.id}/dismiss/`)).json()).toMatchObject({
      status: 'dismissed',
      sent_message_id: null,
    });
    expect(smtp.received.length).toBe(sentBefore);
    expect(
      (await call('GET', '/inbox/suggestions/?status=dismissed')).json().suggestions.map((s: { id: string }) => s.id),
    ).toContain(second.id);
  });

  it('has nothing to suggest for a thread without a reply from the contact', async () => {
    const id = await seed(paid, {
      email: 'quiet@them.example',
      messages: [{ direction: 'outbound', body: 'Hello', minutesAgo: 1 }],
    });
    expect((await call('POST', `/inbox/threads/${id}/suggestions/`)).statusCode).toBe(409);
  });
});

const reasonOf = async (ws: TestWorkspace, email: string | null, url: string | null, seq: string | null = null) =>
  (
    await stack.sql<
      { r: string | null }[]
    >`select contact_stop_reason(${ws.workspaceId}, ${email}, ${url}, now() - interval '1 hour', ${seq}) as r`
  )[0]!.r;

describe('bulk do-not-contact (reachBulkDoNotContact)', () => {
  const reach = (threadIds: string[], ws: TestWorkspace = paid) =>
    call(
      'GET',
      `/inbox/threads/bulk-do-not-contact/reach/?${threadIds.map((t) => `thread_ids=${t}`).join('&')}`,
      undefined,
      ws,
    );

  it('counts contacts as people: one email or one profile URL is one person, across channels', async () => {
    const ws = await stack.createWorkspace('paid');
    const ada = await seed(ws, { email: 'ada@p.example', profileUrl: 'https://pnet.example/in/ada' });
    const adaPnet = await seed(ws, { channel: 'pnet', profileUrl: 'https://www.pnet.example/in/Ada/' });
    const adaAgain = await seed(ws, { email: 'ADA@p.example' });
    const bob = await seed(ws, { email: 'bob@p.example' });
    const noEmail = await seed(ws, { channel: 'pnet', profileUrl: 'https://pnet.example/in/carol' });
    const foreign = await seed(paid, { email: 'foreign@p.example' });
    const res = await reach([ada, adaPnet, adaAgain, bob, noEmail, foreign], ws);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ people: 3, without_email: 1 });
    expect((await reach([adaPnet, noEmail], ws)).json()).toEqual({ people: 2, without_email: 2 });
  });

  it(`takes 1 to ${bulkThreadsMax} thread ids; none, ${bulkThreadsMax + 1} or a malformed one is 422`, async () => {
    const one = await seed(paid, { email: 'one@p.example' });
    expect((await reach([one])).json()).toEqual({ people: 1, without_email: 0 });
    const many = [one, ...Array.from({ length: bulkThreadsMax - 1 }, () => crypto.randomUUID())];
    expect((await reach(many)).json()).toEqual({ people: 1, without_email: 0 });
    const over = await reach([...many, crypto.randomUUID()]);
    expect(over.statusCode).toBe(422);
    expect(over.json().issues[0].loc).toEqual(['query', 'thread_ids']);
    const none = await call('GET', '/inbox/threads/bulk-do-not-contact/reach/');
    expect(none.statusCode).toBe(422);
    expect(none.json().issues[0].loc[0]).toBe('query');
    const malformed = await reach([one, 'not-a-uuid']);
    expect(malformed.statusCode).toBe(422);
    expect(malformed.json().issues[0].loc[0]).toBe('query');

    expect((await call('POST', '/inbox/threads/bulk-do-not-contact/', { thread_ids: [] })).statusCode).toBe(422);
    expect(
      (await call('POST', '/inbox/threads/bulk-do-not-contact/', { thread_ids: [...many, crypto.randomUUID()] }))
        .statusCode,
    ).toBe(422);
    expect((await call('POST', '/inbox/threads/bulk-do-not-contact/', { thread_ids: ['nope'] })).statusCode).toBe(422);
  });

  it('lists the people with an email and stops every current sequence of all of them', async () => {
    const ws = await stack.createWorkspace('paid');
    const contact = crypto.randomUUID();
    // Only our messages, so nothing but the bulk action stops them.
    const messages = [{ direction: 'outbound' as const, body: 'Hi', minutesAgo: 1 }];
    const ada = await seed(ws, { email: 'ada@stop.example', profileUrl: 'https://pnet.example/in/ada-stop', messages });
    const carol = await seed(ws, { channel: 'pnet', profileUrl: 'https://pnet.example/in/carol-stop', messages });
    await stack.sql`update inbox_threads set sequence_contact_id = ${contact} where id = ${carol}`;
    await call('POST', '/do-not-contact/', { kind: 'email', value: 'bob@stop.example' }, ws);
    const bob = await seed(ws, { email: 'bob@stop.example', messages });
    expect(await reasonOf(ws, null, 'pnet.example/in/carol-stop')).toBeNull();
    const res = await call(
      'POST',
      '/inbox/threads/bulk-do-not-contact/',
      { thread_ids: [ada, carol, bob], reason: 'asked' },
      ws,
    );
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ people: 3, without_email: 1, added: 1, already_listed: 1, stopped: 3 });
    const entries = (await call('GET', '/do-not-contact/?search=stop.example', undefined, ws)).json().entries;
    expect(entries.map((e: { value: string; source: string }) => `${e.value}:${e.source}`).sort()).toEqual([
      'ada@stop.example:inbox_bulk',
      'bob@stop.example:manual',
    ]);
    const reason = (email: string | null, url: string | null, seq: string | null = null) =>
      reasonOf(ws, email, url, seq);
    expect(await reason('ada@stop.example', null)).toBe('do_not_contact');
    expect(await reason(null, 'https://pnet.example/in/ada-stop')).toBe('stopped');
    expect(await reason(null, 'pnet.example/in/carol-stop')).toBe('stopped');
    expect(await reason(null, null, contact)).toBe('stopped');
    // A person without an email is not put on the list.
    expect((await call('GET', '/do-not-contact/?kind=profile_url', undefined, ws)).json().total).toBe(0);
  });
});

describe('pnet reads', () => {
  it('records a read_conversation settle as a thread with its messages, once, and the reply stops the contact', async () => {
    const account = await connectedAccount(stack, paid);
    const threadUrl = 'https://pnet.example/messaging/thread/abc-123/';
    const step = await account.queue({ kind: 'read_conversation', thread_url: threadUrl }, { test: true });
    const claimed = (await account.claim()).json();
    expect(claimed.step.id).toBe(step.id);
    const outcome = {
      kind: 'read_conversation',
      thread_url: threadUrl,
      profile_url: 'https://www.pnet.example/in/Grace-Hopper/',
      name: 'Grace Hopper',
      messages: [
        {
          id: 'm-1',
          direction: 'outbound',
          text: 'Hi Grace, great talk!',
          sent_at: new Date(Date.now() - 3_600_000).toISOString(),
        },
        {
          id: 'm-2',
          direction: 'inbound',
          text: 'Thanks! Happy to chat.',
          sent_at: new Date(Date.now() - 60_000).toISOString(),
          profile_url: 'https://pnet.example/in/grace-hopper',
        },
      ],
    };
    const settled = await account.report(step.id, {
      status: 'succeeded',
      claimed_at: claimed.step.claimed_at,
      outcome,
    });
    expect(settled.statusCode).toBe(200);
    expect(settled.json().outcome.messages).toHaveLength(2);
    const list = (await call('GET', '/inbox/threads/?channel=pnet&search=grace-hopper')).json().threads;
    expect(list).toHaveLength(1);
    const thread = (await call('GET', `/inbox/threads/${list[0].id}/`)).json();
    expect(thread).toMatchObject({
      contact_profile_url: 'pnet.example/in/grace-hopper',
      contact_name: 'Grace Hopper',
      unread: true,
      needs_reply: true,
      message_count: 2,
    });
    expect(thread.messages.map((m: { direction: string; body: string }) => `${m.direction}:${m.body}`)).toEqual([
      'outbound:Hi Grace, great talk!',
      'inbound:Thanks! Happy to chat.',
    ]);
    const [stop] = await stack.sql<
      { r: string | null }[]
    >`select contact_stop_reason(${paid.workspaceId}, null, 'https://pnet.example/in/grace-hopper', now() - interval '1 day') as r`;
    expect(stop!.r).toBe('replied');

    // The same conversation read again (with one new message) adds only the new one.
    const next = await account.queue({ kind: 'read_conversation', thread_url: threadUrl }, { test: true });
    const claimedNext = (await account.claim()).json();
    const more = {
      ...outcome,
      messages: [
        ...outcome.messages,
        { id: 'm-3', direction: 'inbound', text: 'Tuesday?', sent_at: new Date().toISOString() },
      ],
    };
    expect(
      (await account.report(next.id, { status: 'succeeded', claimed_at: claimedNext.step.claimed_at, outcome: more }))
        .statusCode,
    ).toBe(200);
    expect(
      (await call('GET', `/inbox/threads/${list[0].id}/`)).json().messages.map((m: { body: string }) => m.body),
    ).toEqual(['Hi Grace, great talk!', 'Thanks! Happy to chat.', 'Tuesday?']);
  });

  it('records the threads a check_inbox finds as unread conversations, and queues one read of each', async () => {
    const account = await connectedAccount(stack, paid);
    const threadUrl = 'https://pnet.example/messaging/thread/zz-9/';
    const outcome = {
      kind: 'check_inbox',
      threads: [
        { thread_url: threadUrl, profile_url: 'https://pnet.example/in/linus', name: 'Linus', unread: true },
        {
          thread_url: 'https://pnet.example/messaging/thread/old-1/',
          profile_url: 'https://pnet.example/in/old-friend',
          name: 'Old Friend',
          unread: false,
        },
      ],
    };
    for (let read = 0; read < 2; read++) {
      const step = await account.queue({ kind: 'check_inbox' }, { test: true });
      const claimed = (await account.claim()).json();
      expect(claimed.step.id).toBe(step.id);
      expect(
        (await account.report(step.id, { status: 'succeeded', claimed_at: claimed.step.claimed_at, outcome }))
          .statusCode,
      ).toBe(200);
    }
    const [thread] = (await call('GET', '/inbox/threads/?channel=pnet&search=linus')).json().threads;
    expect(thread).toMatchObject({
      contact_name: 'Linus',
      contact_profile_url: 'pnet.example/in/linus',
      unread: true,
      message_count: 0,
    });
    // Two reads saw it; one read of the conversation waits, and the browser is handed it.
    const reads = await stack.sql<{ id: string; params: { thread_url: string } }[]>`
      select id, params from browser_steps where account_id = ${account.accountId} and kind = 'read_conversation' and status = 'queued'`;
    expect(reads.map((r) => r.params.thread_url)).toEqual([threadUrl]);
    expect((await account.claim()).json().step).toMatchObject({
      id: reads[0]!.id,
      kind: 'read_conversation',
      params: { thread_url: threadUrl },
    });
  });
});
