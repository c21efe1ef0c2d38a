/**
 * Every type of the notification catalogue fires from a real change: for each type, one email rule
 * on it, the change a person or the worker makes (through the API, the real worker and its local
 * twins), and the rule's delivery of that event recorded as sent. A type nothing emits would be a
 * rule that never fires, so a catalogue entry needs a scenario here or a place in `notYetEmitted`.
 *
 * Rules email the workspace's admin rather than post to a webhook endpoint: an endpoint's own
 * subscription (empty: every type) would carry the event without any rule, hiding a rule that
 * never fires.
 */
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventTitles, eventTypes, type EventType } from '../../domain/notifications/events.js';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { smtpMailer } from '../../integrations/mailer.js';
import { createPayPalPayouts } from '../../integrations/payouts/paypal.js';
import { webhookSender } from '../../integrations/webhooks/sender.js';
import { runPayoutCycle } from '../../services/affiliates/payouts-client.js';
import type { EventDispatcher } from '../../services/notifications/dispatcher.js';
import { serveChatModel, type ChatModelServer } from '../../sim/chat-model-server.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { startPayPalPayoutsTwin, type PayPalPayoutsTwin } from '../../sim/paypal-payouts-server.js';
import { startSmtpSink, type SmtpSink } from '../../sim/smtp-sink.js';
import { setOperatorGate, setPayoutEmail } from '../../store/affiliates/payouts.js';
import { chargeHold, getBalance, grantCredits, holdCredits } from '../../store/platform/credits.js';
import { affiliateWithCommission } from '../support/affiliates.js';
import { readStream } from '../support/assistant.js';
import { events, postStripeEvent, useStripeMock } from '../support/billing.js';
import { multipartBody } from '../support/documents.js';
import { connectedAccount, until } from '../support/pnet.js';
import { sequencesApi } from '../support/sequences.js';
import { tablesClient } from '../support/tables.js';
import { postInboundEmail, startTestDispatcher } from '../support/notifications.js';
import { useTestStack, withKey } from '../support/test-stack.js';

/** Catalogued types with no producer yet: each needs an emitter, then a scenario in place of its entry here. */
const notYetEmitted = [] as const satisfies readonly EventType[];

const { stack, paid } = useTestStack();
const stripe = useStripeMock();
let sink: SmtpSink;
let failingReceiver: LocalHttp;
let model: ChatModelServer;
let payPal: PayPalPayoutsTwin;
let dispatcher: EventDispatcher;
let inboundSecret: string;
/** The tool call the local chat model answers a question with. */
let addColumn = { name: 'add_column', arguments: {} as object };
/** The rule on each type. */
const rules = new Map<EventType, string>();

beforeAll(async () => {
  sink = await startSmtpSink();
  stack.integrations.mailer = smtpMailer(sink.url, { from: 'notifications@outreach.example' });
  failingReceiver = await serveHttp((_req, res) => void res.writeHead(500).end('down'));
  // The failing receiver is on loopback: the development setting allows it here.
  stack.integrations.notifications.webhooks = webhookSender({ allowPrivateNetworks: true });
  model = await serveChatModel((request) =>
    request.messages.some((m) => m.role === 'tool') ? { content: 'Done.' } : { toolCalls: [addColumn] },
  );
  payPal = await startPayPalPayoutsTwin();
  stack.integrations.affiliatePayouts.provider = createPayPalPayouts(
    { clientId: payPal.clientId, clientSecret: payPal.clientSecret, apiBase: payPal.url },
    { sleep: async () => undefined },
  );
  stripe.configure(stack.integrations);
  dispatcher = startTestDispatcher(stack);
  inboundSecret = (await api('POST', '/inbox/settings/webhook-secret/')).json().secret;
  for (const type of eventTypes) {
    const rule = await api('POST', '/notifications/rules/', { event_type: type, channel: 'email' });
    expect(rule.statusCode, rule.body).toBe(201);
    rules.set(type, rule.json().id);
  }
});
afterAll(async () => {
  await dispatcher?.stop();
  await Promise.all([sink?.close(), failingReceiver?.close(), model?.close(), payPal?.close()]);
});

const api = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
  stack.app.inject({ method, url, headers: withKey(paid.apiKey), ...(payload ? { payload } : {}) });

/** The answer's body once it is a success (most scenarios need only the id it names). */
async function ok(response: Promise<LightMyRequestResponse>) {
  const res = await response;
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json<{ id: string }>();
}

/** A reply to the workspace, as the mail provider posts it to the inbound-email webhook. */
function inboundReply() {
  const raw = [
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    `Date: ${new Date().toUTCString()}`,
    'From: Pat <pat@example.org>',
    'To: sales@outreach.example',
    'Subject: Re: our call',
    `Message-ID: <${randomUUID()}@example.org>`,
    '',
    'Sounds good.',
    '',
  ].join('\r\n');
  return ok(postInboundEmail(stack.app, paid.workspaceId, inboundSecret, raw));
}

/** A step queued on the account, claimed by its browser and reported. */
async function runStep(a: Awaited<ReturnType<typeof connectedAccount>>, params: object, report: object, test = false) {
  const step = await a.queue(params, test ? { test: true } : {});
  const claimed = (await a.claim()).json().step;
  expect(claimed?.id).toBe(step.id);
  await ok(a.report(step.id, { claimed_at: claimed.claimed_at, ...report }));
}

/** A new account with these limits claims its first metered inbox read. */
async function claimAt(limits: object) {
  const a = await connectedAccount(stack, paid, { limits });
  await a.queue({ kind: 'check_inbox' });
  expect((await a.claim()).json().step).toMatchObject({ status: 'claimed' });
}

function upload(filename: string, text: string) {
  const body = multipartBody({ filename, contentType: 'text/plain', data: Buffer.from(text) });
  return ok(
    stack.app.inject({
      method: 'POST',
      url: '/business-context/documents/',
      headers: { ...withKey(paid.apiKey), ...body.headers },
      payload: body.payload,
    }),
  );
}

/** The change that records each type: what a person does through the API, or the worker on its own. */
const scenarios: Record<Exclude<EventType, (typeof notYetEmitted)[number]>, () => Promise<unknown>> = {
  'reply.received': inboundReply,
  // A connection our invitation asked for shows up in the account's connections read.
  'invitation.accepted': async () => {
    const a = await connectedAccount(stack, paid);
    const urn = `urn:li:member:${randomUUID()}`;
    const invite = { kind: 'connection_request', profile_url: 'https://pnet.example/in/ada' };
    await runStep(a, invite, { status: 'succeeded', outcome: { member_urn: urn } }, true);
    await runStep(a, { kind: 'check_connections' }, { status: 'succeeded', outcome: { member_urns: [urn] } }, true);
  },
  'step.failed': async () => {
    const a = await connectedAccount(stack, paid);
    await runStep(a, { kind: 'check_inbox' }, { status: 'failed', error_code: 'navigation_failed' }, true);
  },
  'sequence_contact.finished': async () => {
    const seq = sequencesApi(stack, paid);
    const audience = await seq.audience();
    const sequence = await seq.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: { start: 'done', steps: [{ id: 'done', type: 'end' }] },
    });
    await seq.launch(sequence.id);
    const [enrolled] = await seq.enrol(sequence.id, [await audience.addRow({ email: 'fin@example.com' })]);
    await seq.waitFor(sequence.id, enrolled!.contact!.id, (c) => c.status === 'completed');
  },
  'sequence_contact.stopped': async () => {
    const seq = sequencesApi(stack, paid);
    const audience = await seq.audience();
    const sequence = await seq.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      graph: {
        start: 'w',
        steps: [
          { id: 'w', type: 'wait', days: 2, next: 'done' },
          { id: 'done', type: 'end' },
        ],
      },
    });
    await seq.launch(sequence.id);
    const [enrolled] = await seq.enrol(sequence.id, [await audience.addRow({ email: 'stop@example.com' })]);
    await ok(api('POST', `/sequences/${sequence.id}/contacts/${enrolled!.contact!.id}/stop/`));
  },
  'account.checkpoint': async () => {
    const a = await connectedAccount(stack, paid);
    const follow = { kind: 'follow_contact', profile_url: 'https://pnet.example/in/grace' };
    await runStep(a, follow, { status: 'failed', error_code: 'blocked_checkpoint' });
  },
  'account.disconnected': async () => {
    const a = await connectedAccount(stack, paid);
    await ok(api('POST', `/sender-profiles/${a.profileId}/pnet/disconnect/`));
  },
  // A new account's ceilings are a quarter of the settings (at least 1): a daily 1 makes the first claim the day's last.
  'account.daily_cap_reached': () => claimAt({ daily_limit_check_inbox: 1 }),
  // A weekly 1 against the default daily (24, so 6 this first week): the week's ceiling is reached first.
  'account.weekly_cap_reached': () => claimAt({ weekly_limit_check_inbox: 1 }),
  'credits.low': async () => {
    // Down to the threshold (100) as earlier spends would leave it; the step's hold then crosses it.
    const { available } = await getBalance(stack.sql, paid.workspaceId);
    const causeKey = `spend-${randomUUID()}`;
    const hold = await stack.sql.begin((tx) =>
      holdCredits(tx, { workspaceId: paid.workspaceId, amount: available - 100, causeKey }),
    );
    await stack.sql.begin((tx) => chargeHold(tx, hold.id));
    const a = await connectedAccount(stack, paid);
    await a.queue({ kind: 'follow_contact', profile_url: 'https://pnet.example/in/alan' });
    expect((await getBalance(stack.sql, paid.workspaceId)).available).toBeLessThan(100);
    // Back above it for the scenarios after this one.
    await grantCredits(stack.sql, { workspaceId: paid.workspaceId, amount: 10_000, causeKey: `grant-${causeKey}` });
  },
  'billing.payment_failed': async () => {
    const subscription = `sub_${randomUUID()}`;
    const created = events.subscription('customer.subscription.created', paid.workspaceId, {
      subscription,
      status: 'active',
    });
    await ok(postStripeEvent(stack.app, created));
    const failed = events.invoice('invoice.payment_failed', paid.workspaceId, { subscription });
    expect((await postStripeEvent(stack.app, failed)).json().outcome).toMatch(/kept until/);
  },
  // The model asks to add a column; a free card still waits for a person without a grant.
  'card.awaiting_approval': async () => {
    stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
    try {
      const table = await tablesClient(stack, withKey(paid.apiKey)).table({ name: 'Companies' });
      addColumn = { name: 'add_column', arguments: { table_id: table.id, column: { kind: 'input', name: 'Notes' } } };
      const conversation = await ok(api('POST', '/assistant/conversations/', {}));
      // The answer streams (SSE); its card is written before the stream ends.
      const answer = await api('POST', `/assistant/conversations/${conversation.id}/messages/`, {
        content: 'Add a Notes column',
      });
      expect(readStream(answer.body).parts.some((p) => p.type === 'data-proposal')).toBe(true);
    } finally {
      stack.integrations.chatModel = null;
    }
  },
  'document.ready': () => upload('notes.txt', 'Acme sells invoice automation to accounting teams.'),
  'document.failed': () => upload('empty.txt', '   \n'),
  'column_run.finished': async () => {
    const tables = tablesClient(stack, withKey(paid.apiKey));
    const table = await tables.table({ name: 'Sites' });
    const website = await tables.column(table.id, { kind: 'input', name: 'Website' });
    const reader = await tables.column(table.id, {
      kind: 'enrichment',
      name: 'Site',
      provider: 'web_page_reader',
      input_mappings: { url: website.id },
      output_fields: ['title'],
    });
    // A run over no rows has nothing to wait for.
    await ok(tables.post(`/tables/${table.id}/columns/${reader.id}/runs/`, {}));
  },
  // An endpoint failing for 5 days (set back, as the retries test does) is disabled by its next failed attempt.
  'webhook.endpoint_disabled': async () => {
    const endpoint = await ok(
      api('POST', '/webhooks/endpoints/', { url: `${failingReceiver.url}/down`, event_types: ['reply.received'] }),
    );
    await stack.sql`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where id = ${endpoint.id}`;
    await inboundReply();
  },
  // The monthly payout cycle pays the workspace's affiliate through the PayPal twin.
  'affiliate.payout_sent': async () => {
    const affiliate = await affiliateWithCommission(stack.sql, {
      workspaceId: paid.workspaceId,
      cents: 7500,
      occurredAt: new Date(Date.now() - 86_400_000),
      causePrefix: 'test-commission',
    });
    const ids = { affiliateId: affiliate.id, workspaceId: paid.workspaceId };
    await setPayoutEmail(stack.sql, { ...ids, email: 'aff@example.com' });
    await setOperatorGate(stack.sql, { ...ids, gate: 'identity_verified', on: true, note: null, now: new Date() });
    const at = new Date(Date.UTC(2027, 0, 1, 0, 0, 5));
    const cycle = await runPayoutCycle({ client: stack.client, taskQueue: stack.taskQueue }, { at, followForMs: 0 });
    expect(cycle.refused).toBeNull();
  },
  // An admin makes a new member an admin, then removes them (the API key's admin stays).
  'member.role_changed': async () => {
    const memberId = await newMember();
    await ok(api('PATCH', `/workspace/members/${memberId}/`, { role: 'admin' }));
  },
  'member.removed': async () => {
    const memberId = await newMember();
    const removed = await stack.app.inject({
      method: 'DELETE',
      url: `/workspace/members/${memberId}/`,
      headers: withKey(paid.apiKey),
    });
    expect(removed.statusCode, removed.body).toBe(204);
  },

  // A person of the workspace's organisation joins on first use of their token.
  'member.joined': async () => {
    const token = await stack.mintToken({
      sub: `joiner-${randomUUID()}`,
      org_id: paid.workspaceId,
      email: `joiner-${randomUUID().slice(0, 8)}@example.com`,
    });
    const res = await stack.app.inject({
      method: 'GET',
      url: '/workspace/',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.statusCode, res.body).toBe(200);
  },

  // The admin's key invites a person by email (the SMTP sink of beforeAll takes the invitation
  // email), then revokes a second invitation.
  'member.invited': () => invite(),
  'member.invitation_revoked': async () => {
    const { id } = await invite();
    const revoked = await stack.app.inject({
      method: 'DELETE',
      url: `/workspace/invitations/${id}/`,
      headers: withKey(paid.apiKey),
    });
    expect(revoked.statusCode, revoked.body).toBe(204);
  },
};

/** An invitation of a new address to the paid workspace. */
const invite = () =>
  ok(api('POST', '/workspace/invitations/', { email: `invitee-${randomUUID().slice(0, 8)}@example.com` }));

/** A member added to the paid workspace as an operator would: their member id. */
async function newMember() {
  const { userId } = await stack.addMember(paid.workspaceId, 'member');
  const members = (await api('GET', '/workspace/members/')).json<{ members: { id: string; user_id: string }[] }>();
  return members.members.find((m) => m.user_id === userId)!.id;
}

const lastSeq = async () =>
  (
    await stack.sql<{ seq: string }[]>`
      select coalesce(max(seq), 0)::text as seq from workspace_events where workspace_id = ${paid.workspaceId}`
  )[0]!.seq;

describe('the notification catalogue', () => {
  it('has a scenario for every type but those not yet emitted', () => {
    expect([...Object.keys(scenarios), ...notYetEmitted].sort()).toEqual([...eventTypes].sort());
  });

  for (const [type, scenario] of Object.entries(scenarios) as [EventType, () => Promise<unknown>][]) {
    it(`fires a rule on ${type} from a real change`, async () => {
      const since = await lastSeq();
      await scenario();
      const rule = rules.get(type)!;
      await until(
        `the rule on ${type} delivered an event recorded by the change`,
        async () =>
          (
            await stack.sql`
              select 1 from notification_deliveries d join workspace_events e on e.id = d.event_id
              where e.workspace_id = ${paid.workspaceId} and e.type = ${type} and e.seq > ${since}
                and d.rule_id = ${rule} and d.channel = 'email' and d.status = 'succeeded' and d.attempt_count >= 1`
          ).length > 0,
        20_000,
      );
      expect(sink.messages.some((m) => m.subject === eventTitles[type])).toBe(true);
    });
  }
});
