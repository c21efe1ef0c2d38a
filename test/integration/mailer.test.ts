import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMailerActivities } from '../../activities/sequences/mailer.js';
import { messageIdOf } from '../../domain/sequences/sequences.js';
import { sequencesApi, startSmtpServer, type SequencesApi } from '../support/sequences.js';
import { useTestStack, withKey } from '../support/test-stack.js';
import { smtpMailer, Mailer } from '../../integrations/mailer.js';

// The SMTP server starts first: the stack's worker reads SMTP_URL when it is built.
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
beforeAll(async () => {
  smtp = await startSmtpServer();
  process.env.SMTP_URL = smtp.url;
  process.env.SMTP_FROM = 'outreach@mail.example';
});
afterAll(() => smtp?.close());

const { stack, paid } = useTestStack();
let api: SequencesApi;
beforeAll(() => {
  api = sequencesApi(stack, paid);
});

const emailGraph = {
  start: 'hello',
  steps: [
    {
      id: 'hello',
      type: 'email',
      subject_segments: [
        { kind: 'text', text: 'Hello ' },
        { kind: 'builtin', builtin: 'first_name' },
      ],
      body_segments: [
        { kind: 'text', text: 'Hi ' },
        { kind: 'builtin', builtin: 'first_name' },
        { kind: 'text', text: ', from ' },
        { kind: 'builtin', builtin: 'sender_first_name' },
      ],
      next: 'done',
    },
    { id: 'done', type: 'end' },
  ],
};

/** A contact of an active sequence whose email is approved and ready; no workflow runs it, the test calls the activity itself. */
async function approvedSend(email: string) {
  const audience = await api.audience();
  const sender = await api.sender();
  const seq = await api.sequence({
    audience_table_id: audience.tableId,
    audience_mapping: audience.mapping,
    email_mode: 'automatic',
    senders: [{ sender_profile_id: sender, from_email: 'ada@sender.example' }],
    graph: emailGraph,
  });
  const rowId = await audience.addRow({ email, first: 'Zed' });
  // Written directly (not enrolled through the API) so that no contact workflow races the test.
  const [contact] = await stack.sql<{ id: string }[]>`
    insert into sequence_contacts (workspace_id, sequence_id, row_id, contact_key, email, first_name, sender_profile_id, version, current_step_id)
    values (${paid.workspaceId}, ${seq.id}, ${rowId}, ${`${seq.id}:${rowId}`}, ${email}, 'Zed', ${sender}, 1, 'hello') returning id`;
  const contactId = contact!.id;
  const messageId = messageIdOf(contactId, 'hello', 1, 'mail.example');
  const [send] = await stack.sql<{ id: string }[]>`
    insert into sequence_sends (workspace_id, sequence_id, contact_id, step_id, version, channel, kind, status, message_id, to_email, from_email, subject, body)
    values (${paid.workspaceId}, ${seq.id}, ${contactId}, 'hello', 1, 'email', 'email', 'approved', ${messageId}, ${email}, 'ada@sender.example', 'Hello', 'Hi there')
    returning id`;
  await stack.sql`update sequences set status = 'active' where id = ${seq.id}`;
  return { sendId: send!.id, messageId, contactId, seqId: seq.id };
}

const receivedBy = (address: string) => smtp.received.filter((m) => JSON.stringify(m.to).includes(address));

describe('sequence email through SMTP', () => {
  it("sends a launched sequence's email once, with the stable Message-ID of contact, step and version", async () => {
    const audience = await api.audience();
    const sender = await api.sender('Grace Hopper');
    const seq = await api.sequence({
      audience_table_id: audience.tableId,
      audience_mapping: audience.mapping,
      email_mode: 'automatic',
      senders: [{ sender_profile_id: sender, from_email: 'grace@sender.example', from_name: null }],
      graph: emailGraph,
    });
    await api.launch(seq.id);
    const [enrolled] = await api.enrol(seq.id, [await audience.addRow({ email: 'ada@example.com', first: 'Ada' })]);
    const contactId = enrolled!.contact!.id;
    const done = await api.waitFor(seq.id, contactId, (c) => c.status === 'completed');
    expect(done.done_steps).toEqual(['hello']);

    const mails = receivedBy('ada@example.com');
    expect(mails).toHaveLength(1);
    expect(mails[0]!.messageId).toBe(messageIdOf(contactId, 'hello', 1, 'mail.example'));
    expect(mails[0]!.subject).toBe('Hello Ada');
    expect(mails[0]!.text?.trim()).toBe('Hi Ada, from Grace');
    expect(mails[0]!.from?.value[0]).toMatchObject({ address: 'grace@sender.example', name: 'Grace Hopper' });
    const [send] =
      await stack.sql`select status, unconfirmed, sent_at from sequence_sends where contact_id = ${contactId}`;
    expect(send).toMatchObject({ status: 'sent', unconfirmed: false, sent_at: expect.any(Date) });
  });

  it('keeps the Message-ID across a retried send after a connection failure, and the server receives one message', async () => {
    const { sendId, messageId } = await approvedSend('retry-conn@example.com');
    const real = smtpMailer(smtp.url, { from: 'outreach@mail.example' });
    const ids: string[] = [];
    let calls = 0;
    const flaky: Mailer = {
      ...real,
      async send(mail) {
        ids.push(mail.messageId);
        calls += 1;
        if (calls === 1) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNECTION' });
        return real.send(mail);
      },
    };
    const acts = createMailerActivities({ sql: stack.sql, mailer: flaky });
    await expect(acts.sendSequenceEmail({ sendId })).rejects.toThrow('ECONNREFUSED');
    // Certainly not delivered: the claim went back, and the retry sends.
    expect((await stack.sql`select status from sequence_sends where id = ${sendId}`)[0]!.status).toBe('approved');
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({ outcome: 'sent', reason: null });
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({ outcome: 'already_sent', reason: null });
    expect(ids).toEqual([messageId, messageId]);
    const mails = receivedBy('retry-conn@example.com');
    expect(mails.map((m) => m.messageId)).toEqual([messageId]);
  });

  it('never sends twice when the result of a delivered message was lost: the retry finds the claim and stops', async () => {
    const { sendId, messageId } = await approvedSend('lost-ack@example.com');
    const real = smtpMailer(smtp.url, { from: 'outreach@mail.example' });
    let calls = 0;
    const lossy: Mailer = {
      ...real,
      async send(mail) {
        calls += 1;
        await real.send(mail);
        // Delivered, but the worker never hears back (socket dropped, process killed).
        throw Object.assign(new Error('socket hang up'), { code: 'ESOCKET' });
      },
    };
    const acts = createMailerActivities({ sql: stack.sql, mailer: lossy });
    await expect(acts.sendSequenceEmail({ sendId })).rejects.toThrow('socket hang up');
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({ outcome: 'unconfirmed', reason: null });
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({ outcome: 'already_sent', reason: null });
    expect(calls).toBe(1);
    expect(receivedBy('lost-ack@example.com').map((m) => m.messageId)).toEqual([messageId]);
    const [send] = await stack.sql`select status, unconfirmed from sequence_sends where id = ${sendId}`;
    expect(send).toEqual({ status: 'sent', unconfirmed: true });
    // A person finds it: on the record, and in the queue's list of unconfirmed sends.
    const read = (url: string) =>
      stack.app.inject({ method: 'GET', url, headers: withKey(paid.apiKey) }).then((r) => r.json());
    expect(await read(`/sequences/approvals/${sendId}/`)).toMatchObject({
      status: 'sent',
      unconfirmed: true,
      message_id: messageId,
    });
    expect((await read('/sequences/approvals/?unconfirmed=true')).approvals.map((a: { id: string }) => a.id)).toEqual([
      sendId,
    ]);
    expect((await read('/sequences/approvals/')).approvals.map((a: { id: string }) => a.id)).not.toContain(sendId);
  });

  it('re-checks the person in the transaction that claims the send: a reply recorded just before means no send', async () => {
    const { sendId, contactId } = await approvedSend('replied@example.com');
    const [thread] = await stack.sql<{ id: string }[]>`
      insert into inbox_threads (workspace_id, channel, contact_email) values (${paid.workspaceId}, 'email', 'replied@example.com') returning id`;
    await stack.sql`insert into inbox_messages (workspace_id, thread_id, direction, kind, from_email, body, occurred_at)
                    values (${paid.workspaceId}, ${thread!.id}, 'inbound', 'reply', 'replied@example.com', 'Not interested', now())`;
    const acts = createMailerActivities({
      sql: stack.sql,
      mailer: smtpMailer(smtp.url, { from: 'outreach@mail.example' }),
    });
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({ outcome: 'stopped', reason: 'replied' });
    expect(receivedBy('replied@example.com')).toHaveLength(0);
    expect((await stack.sql`select status, reason from sequence_sends where id = ${sendId}`)[0]).toEqual({
      status: 'stopped',
      reason: 'replied',
    });
    expect((await stack.sql`select status, stop_reason from sequence_contacts where id = ${contactId}`)[0]).toEqual({
      status: 'stopped',
      stop_reason: 'replied',
    });
  });

  it('refuses at the send when the address was put on the do-not-contact list by domain', async () => {
    const { sendId } = await approvedSend('someone@blocked.example');
    await stack.sql`insert into do_not_contact_entries (workspace_id, kind, value) values (${paid.workspaceId}, 'domain', 'blocked.example')`;
    const acts = createMailerActivities({
      sql: stack.sql,
      mailer: smtpMailer(smtp.url, { from: 'outreach@mail.example' }),
    });
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({ outcome: 'stopped', reason: 'do_not_contact' });
    expect(receivedBy('someone@blocked.example')).toHaveLength(0);
  });

  it('says so instead of sending when no SMTP server is configured', async () => {
    const { sendId } = await approvedSend('nomailer@example.com');
    const acts = createMailerActivities({ sql: stack.sql, mailer: null });
    expect(await acts.sendSequenceEmail({ sendId })).toEqual({
      outcome: 'no_mailer',
      reason: 'SMTP_URL is not configured',
    });
    expect((await stack.sql`select status from sequence_sends where id = ${sendId}`)[0]!.status).toBe('approved');
  });

  it('carries an open-tracking pixel when the service has a public address, and loading it records the first open', async () => {
    const { sendId } = await approvedSend('opens@example.com');
    const acts = createMailerActivities({
      sql: stack.sql,
      mailer: smtpMailer(smtp.url, { from: 'outreach@mail.example' }),
      publicBaseUrl: 'https://api.example/',
    });
    expect((await acts.sendSequenceEmail({ sendId })).outcome).toBe('sent');
    const [mail] = receivedBy('opens@example.com');
    const token = (
      await stack.sql<{ open_token: string }[]>`select open_token from sequence_sends where id = ${sendId}`
    )[0]!.open_token;
    expect(mail!.html).toContain(`https://api.example/sequences/opens/${token}/`);
    expect(mail!.text?.trim()).toBe('Hi there');

    const pixel = await stack.app.inject({ method: 'GET', url: `/sequences/opens/${token}/` });
    expect(pixel.statusCode).toBe(200);
    expect(pixel.headers['content-type']).toBe('image/gif');
    const [first] = await stack.sql<{ opened_at: Date }[]>`select opened_at from sequence_sends where id = ${sendId}`;
    expect(first!.opened_at).toBeInstanceOf(Date);
    await stack.app.inject({ method: 'GET', url: `/sequences/opens/${token}/` });
    expect((await stack.sql`select opened_at from sequence_sends where id = ${sendId}`)[0]!.opened_at).toEqual(
      first!.opened_at,
    );
    // An unknown token answers the same image; a malformed one is refused.
    expect((await stack.app.inject({ method: 'GET', url: `/sequences/opens/${'0'.repeat(32)}/` })).statusCode).toBe(
      200,
    );
    expect((await stack.app.inject({ method: 'GET', url: '/sequences/opens/not-a-token/' })).statusCode).toBe(422);
  });
});
