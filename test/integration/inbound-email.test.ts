import { createServer, type AddressInfo, type Socket } from 'node:net';
import { seal } from '../../integrations/secrets/sealed.js';
import { secretsKeyring } from '../../services/platform/sealing.js';
import { mailboxPasswordContext } from '../../services/inbox/inbox.js';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { recordSentEmail } from '../../store/inbox/messages.js';
import { mailboxPollWorkflow } from '../../workflows/inbox/mailbox-poll.js';
import {
  mailboxPollStateQuery,
  mailboxPollWorkflowId,
  pollMailboxNowSignal,
} from '../../workflows/inbox/mailbox-poll.contract.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';
import { signInboundEmail } from '../../domain/inbox/inbound-signature.js';
import { useTestStack, withKey } from '../support/test-stack.js';
import { pollMailbox } from '../../services/inbox/mailbox-poll.js';
import type { MailboxPollResult } from '../../domain/inbox/inbox.js';

const { stack, paid } = useTestStack();
let secret: string;
beforeAll(async () => {
  const rotated = await stack.app.inject({
    method: 'POST',
    url: '/inbox/settings/webhook-secret/',
    headers: withKey(paid.apiKey),
  });
  expect(rotated.statusCode).toBe(201);
  secret = rotated.json().secret;
});

const now = () => String(Math.floor(Date.now() / 1000));

function deliver(
  raw: string,
  options: { ws?: string; timestamp?: string; signature?: string; contentType?: string; key?: string } = {},
) {
  const body = Buffer.from(raw.replace(/\n/g, '\r\n'));
  const timestamp = options.timestamp ?? now();
  return stack.app.inject({
    method: 'POST',
    url: '/inbox/inbound-email/',
    headers: {
      'content-type': options.contentType ?? 'message/rfc822',
      'x-inbox-workspace': options.ws ?? paid.workspaceId,
      'x-inbox-timestamp': timestamp,
      'x-inbox-signature': options.signature ?? signInboundEmail(options.key ?? secret, timestamp, body),
    },
    payload: body,
  });
}

const email = (headers: Record<string, string>, body = 'Sounds interesting, tell me more.') =>
  `${Object.entries({
    'MIME-Version': '1.0',
    'Content-Type': 'text/plain; charset=utf-8',
    Date: new Date().toUTCString(),
    ...headers,
  })
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n')}\n\n${body}\n`;

const thread = async (id: string) =>
  (await stack.app.inject({ method: 'GET', url: `/inbox/threads/${id}/`, headers: withKey(paid.apiKey) })).json();
const stopReason = async (address: string) => {
  const [row] = await stack.sql<
    { r: string | null }[]
  >`select contact_stop_reason(${paid.workspaceId}, ${address}, null, now() - interval '1 hour') as r`;
  return row!.r;
};

async function sent(to: string, messageId: string) {
  return stack.sql.begin((tx) =>
    recordSentEmail(tx, {
      workspaceId: paid.workspaceId,
      messageId,
      from: 'me@ours.example',
      to,
      subject: 'Quick question',
      body: 'Hi there',
      sentAt: new Date(Date.now() - 60_000),
    }),
  );
}

describe('the inbound-email webhook signature', () => {
  const raw = () =>
    email({
      From: 'sig@them.example',
      To: 'me@ours.example',
      Subject: 'Hi',
      'Message-ID': `<${crypto.randomUUID()}@them.example>`,
    });

  it('accepts a good signature', async () => {
    expect((await deliver(raw())).statusCode).toBe(200);
  });

  it('refuses a bad signature, another workspace’s secret and missing headers with 401, recording nothing', async () => {
    const before = await stack.sql`select count(*)::int as n from inbox_messages`;
    const bad = await deliver(raw(), { signature: `sha256=${'0'.repeat(64)}` });
    expect(bad.statusCode).toBe(401);
    expect(bad.json()).toEqual({ detail: 'Missing, invalid or stale webhook signature.' });
    expect((await deliver(raw(), { key: 'whsec_someone-else' })).statusCode).toBe(401);
    const other = await stack.createWorkspace('paid');
    expect((await deliver(raw(), { ws: other.workspaceId })).statusCode).toBe(401);
    const unsigned = await stack.app.inject({
      method: 'POST',
      url: '/inbox/inbound-email/',
      headers: { 'content-type': 'message/rfc822' },
      payload: raw(),
    });
    expect(unsigned.statusCode).toBe(401);
    expect(await stack.sql`select count(*)::int as n from inbox_messages`).toEqual(before);
  });

  it('refuses a timestamp more than five minutes old or ahead, and accepts one just inside', async () => {
    // The server compares with its own clock a moment later, to the millisecond: a whole second
    // rounded down for the old one and up for the one ahead keeps each past the bound however the
    // second is split (rounding down for the one ahead lost up to a second, and failed at times).
    const now = Date.now() / 1000;
    const seconds = Math.floor(now);
    expect((await deliver(raw(), { timestamp: String(seconds - 301) })).statusCode).toBe(401);
    expect((await deliver(raw(), { timestamp: String(Math.ceil(now) + 301) })).statusCode).toBe(401);
    expect((await deliver(raw(), { timestamp: String(seconds - 290) })).statusCode).toBe(200);
  });

  it('refuses a body that is not raw MIME with 415', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/inbox/inbound-email/',
      payload: { hello: 'json' },
      headers: { 'x-inbox-workspace': paid.workspaceId, 'x-inbox-timestamp': now(), 'x-inbox-signature': 'sha256=00' },
    });
    expect(res.statusCode).toBe(415);
  });

  it('a rotated secret replaces the old one at once', async () => {
    const ws = await stack.createWorkspace('paid');
    const first = (
      await stack.app.inject({ method: 'POST', url: '/inbox/settings/webhook-secret/', headers: withKey(ws.apiKey) })
    ).json().secret;
    const second = (
      await stack.app.inject({ method: 'POST', url: '/inbox/settings/webhook-secret/', headers: withKey(ws.apiKey) })
    ).json().secret;
    expect(second).not.toBe(first);
    expect((await deliver(raw(), { ws: ws.workspaceId, key: first })).statusCode).toBe(401);
    expect((await deliver(raw(), { ws: ws.workspaceId, key: second })).statusCode).toBe(200);
    const settings = (
      await stack.app.inject({ method: 'GET', url: '/inbox/settings/', headers: withKey(ws.apiKey) })
    ).json();
    expect(settings).toMatchObject({ webhook_path: '/inbox/inbound-email/', webhook_secret_set: true });
    expect(JSON.stringify(settings)).not.toContain(second);
  });
});

describe('recording inbound email', () => {
  it('threads a reply to our sent message by In-Reply-To, and the reply stops the contact', async () => {
    const threadId = await sent('bob@them.example', '<seq-1@ours.example>');
    const res = await deliver(
      email({
        From: 'Bob Builder <Bob@Them.example>',
        To: 'me@ours.example',
        Subject: 'Re: Quick question',
        'Message-ID': '<bob-1@them.example>',
        'In-Reply-To': '<seq-1@ours.example>',
      }),
    );
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ thread_id: threadId, kind: 'reply', duplicate: false });
    const t = await thread(threadId);
    expect(t).toMatchObject({
      channel: 'email',
      contact_email: 'bob@them.example',
      contact_name: 'Bob Builder',
      unread: true,
      needs_reply: true,
      message_count: 2,
    });
    expect(t.messages.map((m: { kind: string; direction: string }) => `${m.direction}:${m.kind}`)).toEqual([
      'outbound:sent',
      'inbound:reply',
    ]);
    expect(t.messages[1]).toMatchObject({
      from_email: 'bob@them.example',
      body: 'Sounds interesting, tell me more.',
      external_id: '<bob-1@them.example>',
    });
    expect(await stopReason('bob@them.example')).toBe('replied');
  });

  it('threads a reply to a sequence email by its Message-ID, with that email in the thread and the sequence contact linked', async () => {
    const post = async (url: string, payload: object) =>
      (await stack.app.inject({ method: 'POST', url, headers: withKey(paid.apiKey), payload })).json();
    const table = await post('/tables/', { name: 'Audience' });
    const column = await post(`/tables/${table.id}/columns/`, { kind: 'input', name: 'Email' });
    const row = await post(`/tables/${table.id}/rows/`, { cells: { [column.id]: 'seq-person@them.example' } });
    const sequence = await post('/sequences/', {
      name: 'Outreach',
      audience_table_id: table.id,
      audience_mapping: { email_column_id: column.id },
    });
    const contact = (await post(`/sequences/${sequence.id}/contacts/`, { row_ids: [row.id] })).results[0].contact;
    await stack.sql`
      insert into sequence_sends (workspace_id, sequence_id, contact_id, step_id, version, channel, kind, status, message_id, to_email, from_email, subject, body, sent_at)
      values (${paid.workspaceId}, ${sequence.id}, ${contact.id}, 'hello', 1, 'email', 'email', 'sent', '<seq.test@ours.example>', 'seq-person@them.example',
              'me@ours.example', 'Hello from us', 'Our first email', now() - interval '1 day')`;
    const res = (
      await deliver(
        email({
          From: 'seq-person@them.example',
          To: 'me@ours.example',
          Subject: 'Re: Hello from us',
          'Message-ID': '<seq-reply@them.example>',
          'In-Reply-To': '<seq.test@ours.example>',
        }),
      )
    ).json();
    const t = await thread(res.thread_id);
    expect(t).toMatchObject({
      sequence_contact_id: contact.id,
      contact_email: 'seq-person@them.example',
      subject: 'Hello from us',
      needs_reply: true,
    });
    expect(t.messages.map((m: { direction: string; body: string }) => `${m.direction}:${m.body}`)).toEqual([
      'outbound:Our first email',
      'inbound:Sounds interesting, tell me more.',
    ]);
  });

  it('threads by References when In-Reply-To is missing', async () => {
    const threadId = await sent('carol@them.example', '<seq-2@ours.example>');
    const res = await deliver(
      email({
        From: 'carol@them.example',
        To: 'me@ours.example',
        Subject: 'Re: hi',
        'Message-ID': '<carol-1@them.example>',
        References: '<other@x.example> <seq-2@ours.example>',
      }),
    );
    expect(res.json().thread_id).toBe(threadId);
  });

  it('records a redelivery once: same answer, duplicate true, nothing new', async () => {
    const raw = email({
      From: 'dup@them.example',
      To: 'me@ours.example',
      Subject: 'Once',
      'Message-ID': '<dup-1@them.example>',
    });
    const first = (await deliver(raw)).json();
    const again = await deliver(raw);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual({ ...first, duplicate: true });
    expect((await thread(first.thread_id)).message_count).toBe(1);
  });

  it('classifies a delivery status notification as a bounce of the failed recipient, threaded by the quoted Message-ID', async () => {
    const threadId = await sent('gone@them.example', '<seq-3@ours.example>');
    const dsn = [
      'From: Mail Delivery Subsystem <MAILER-DAEMON@mx.ours.example>',
      'To: me@ours.example',
      'Subject: Undelivered Mail Returned to Sender',
      'Message-ID: <dsn-1@mx.ours.example>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain',
      '',
      'Your message could not be delivered.',
      '--b1',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.ours.example',
      '',
      'Final-Recipient: rfc822; Gone@Them.example',
      'Action: failed',
      'Status: 5.1.1',
      '--b1',
      'Content-Type: text/rfc822-headers',
      '',
      'From: me@ours.example',
      'To: gone@them.example',
      'Subject: Quick question',
      'Message-ID: <seq-3@ours.example>',
      '--b1--',
      '',
    ].join('\n');
    const res = await deliver(dsn);
    expect(res.json()).toMatchObject({ thread_id: threadId, kind: 'bounce' });
    const t = await thread(threadId);
    expect(t.messages.at(-1)).toMatchObject({ kind: 'bounce', from_email: 'gone@them.example', direction: 'inbound' });
    expect(t.needs_reply).toBe(false);
    expect(await stopReason('gone@them.example')).toBe('bounced');
  });

  it('classifies an out-of-office message as an auto-reply, which stops nothing and needs no reply', async () => {
    const threadId = await sent('away@them.example', '<seq-4@ours.example>');
    const variants: Record<string, string>[] = [
      { 'Auto-Submitted': 'auto-replied' },
      { 'X-Autoreply': 'yes' },
      { Subject: 'Out of Office: back Monday' },
    ];
    for (const [i, headers] of variants.entries()) {
      const res = await deliver(
        email(
          {
            From: 'away@them.example',
            To: 'me@ours.example',
            Subject: 'Re: Quick question',
            'Message-ID': `<away-${i}@them.example>`,
            'In-Reply-To': '<seq-4@ours.example>',
            ...headers,
          },
          'I am away.',
        ),
      );
      expect(res.json()).toMatchObject({ thread_id: threadId, kind: 'auto_reply' });
    }
    expect((await thread(threadId)).needs_reply).toBe(false);
    expect(await stopReason('away@them.example')).toBeNull();
  });

  it('starts a new thread for a first message from someone, filed under their address', async () => {
    const res = (
      await deliver(
        email({
          From: 'New Person <new@them.example>',
          To: 'Sales@Ours.example',
          Subject: 'Hello',
          'Message-ID': '<new-1@them.example>',
        }),
      )
    ).json();
    const t = await thread(res.thread_id);
    expect(t).toMatchObject({
      contact_email: 'new@them.example',
      contact_name: 'New Person',
      subject: 'Hello',
      message_count: 1,
      needs_reply: true,
    });
    // The next message from them without threading headers joins the same thread.
    const next = (
      await deliver(
        email({
          From: 'new@them.example',
          To: 'sales@ours.example',
          Subject: 'Hello again',
          'Message-ID': '<new-2@them.example>',
        }),
      )
    ).json();
    expect(next.thread_id).toBe(res.thread_id);
  });
});

/**
 * A small IMAP responder: enough of RFC 3501 for a client to log in, list, open a folder
 * read-only and fetch messages by UID. Its folder's messages and UIDVALIDITY are the test's to change.
 */
async function startImap() {
  const folder = { uidValidity: 1000, messages: [] as { uid: number; source: Buffer }[], nextUid: 1 };
  const commands: string[] = [];
  const ranges: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.write('* OK [CAPABILITY IMAP4rev1] local IMAP ready\r\n');
    let buffer = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      let end: number;
      while ((end = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const [tag, rawCommand = '', ...rest] = line.split(' ');
        const command = rawCommand.toUpperCase();
        const args = rest.join(' ');
        commands.push(command === 'UID' ? `UID ${args.split(' ')[0]!.toUpperCase()}` : command);
        const ok = (text = 'done') => socket.write(`${tag} OK ${text}\r\n`);
        if (command === 'CAPABILITY') {
          socket.write('* CAPABILITY IMAP4rev1\r\n');
          ok();
        } else if (command === 'LOGIN') ok('[CAPABILITY IMAP4rev1] logged in');
        else if (command === 'LIST' || command === 'LSUB') {
          socket.write(
            args.endsWith('""') ? `* ${command} (\\Noselect) "/" ""\r\n` : `* ${command} () "/" "INBOX"\r\n`,
          );
          ok();
        } else if (command === 'SELECT' || command === 'EXAMINE') {
          socket.write(
            `* ${folder.messages.length} EXISTS\r\n* 0 RECENT\r\n* FLAGS (\\Seen)\r\n* OK [PERMANENTFLAGS ()] none\r\n` +
              `* OK [UIDVALIDITY ${folder.uidValidity}] valid\r\n* OK [UIDNEXT ${folder.nextUid}] next\r\n`,
          );
          ok(`[READ-ONLY] ${command} done`);
        } else if (command === 'UID' && args.toUpperCase().startsWith('FETCH')) {
          const range = args.split(' ')[1]!;
          ranges.push(range);
          const [from, to] = range.split(':');
          const low = Number(from);
          const high = to === undefined ? low : to === '*' ? Number.MAX_SAFE_INTEGER : Number(to);
          folder.messages.forEach((m, i) => {
            if (m.uid < low || m.uid > high) return;
            socket.write(`* ${i + 1} FETCH (UID ${m.uid} BODY[] {${m.source.length}}\r\n`);
            socket.write(m.source);
            socket.write(')\r\n');
          });
          ok('fetch done');
        } else if (command === 'LOGOUT') {
          socket.write('* BYE bye\r\n');
          ok();
          socket.end();
        } else if (command === 'NOOP' || command === 'CLOSE') ok();
        else socket.write(`${tag} BAD not supported here\r\n`);
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    folder,
    commands,
    ranges,
    add(raw: string) {
      folder.messages.push({ uid: folder.nextUid++, source: Buffer.from(raw.replace(/\n/g, '\r\n')) });
    },
    close: () => new Promise<void>((resolve) => (sockets.forEach((s) => s.destroy()), server.close(() => resolve()))),
  };
}

describe('reading a mailbox over IMAP', () => {
  const waitFor = <T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> =>
    vi.waitFor(
      async () => {
        const value = await read();
        if (!done(value)) expect.fail(`never reached: ${JSON.stringify(value)}`);
        return value;
      },
      { timeout: 20_000, interval: 200 },
    );

  it('records new messages from a durable cursor, reads again after a UIDVALIDITY change without duplicates, and stops when deleted', async () => {
    const imap = await startImap();
    try {
      const ws = await stack.createWorkspace('paid');
      const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
        stack.app.inject({ method, url, headers: withKey(ws.apiKey), ...(payload ? { payload } : {}) });
      const sentId = await stack.sql.begin((tx) =>
        recordSentEmail(tx, {
          workspaceId: ws.workspaceId,
          messageId: '<imap-seq@ours.example>',
          from: 'me@ours.example',
          to: 'imap@them.example',
          subject: 'Hi',
          body: 'Hi',
          sentAt: new Date(Date.now() - 60_000),
        }),
      );
      imap.add(
        email(
          {
            From: 'imap@them.example',
            To: 'me@ours.example',
            Subject: 'Re: Hi',
            'Message-ID': '<imap-1@them.example>',
            'In-Reply-To': '<imap-seq@ours.example>',
          },
          'Reply over IMAP',
        ),
      );
      imap.add(
        email(
          {
            From: 'other@them.example',
            To: 'me@ours.example',
            Subject: 'Hello',
            'Message-ID': '<imap-2@them.example>',
          },
          'Another',
        ),
      );

      const created = await call('POST', '/inbox/mailboxes/', {
        address: 'me@ours.example',
        host: '127.0.0.1',
        port: imap.port,
        secure: false,
        username: 'me',
        password: 'secret',
        poll_seconds: 3600,
      });
      expect(created.statusCode).toBe(201);
      const mailbox = created.json();
      expect(mailbox).toMatchObject({
        workflow_id: `inbox-mailbox/${mailbox.id}`,
        folder: 'INBOX',
        last_uid: 0,
        enabled: true,
      });
      expect(JSON.stringify(mailbox)).not.toContain('secret');
      // Sealed at rest: the stored value is not the password, and it logs in (the poll below reads the folder).
      const [stored] = await stack.sql<
        { password_sealed: string }[]
      >`select password_sealed from inbox_mailboxes where id = ${mailbox.id}`;
      expect(stored!.password_sealed).not.toContain('secret');
      expect(stored!.password_sealed).toMatch(/^[^.]+\.[^.]+\./);
      const read = () => call('GET', `/inbox/mailboxes/${mailbox.id}/`).then((r) => r.json());
      expect(await waitFor(read, (m) => m.last_uid === 2)).toMatchObject({
        uid_validity: 1000,
        messages_recorded: 2,
        last_error: null,
      });
      const thread = (await call('GET', `/inbox/threads/${sentId}/`)).json();
      expect(thread.messages.map((m: { body: string }) => m.body)).toEqual(['Hi', 'Reply over IMAP']);
      expect(imap.commands).toContain('EXAMINE');

      // A new message is read from the cursor on: only UID 3 is fetched.
      imap.add(
        email(
          {
            From: 'third@them.example',
            To: 'me@ours.example',
            Subject: 'Third',
            'Message-ID': '<imap-3@them.example>',
          },
          'Third',
        ),
      );
      expect((await call('POST', `/inbox/mailboxes/${mailbox.id}/poll/`)).statusCode).toBe(202);
      expect(await waitFor(read, (m) => m.last_uid === 3)).toMatchObject({ messages_recorded: 3 });
      expect(imap.ranges).toEqual(['1:2', '3:3']);

      // The server renumbers the folder: read again from the start, nothing recorded twice.
      imap.folder.uidValidity = 2000;
      await call('POST', `/inbox/mailboxes/${mailbox.id}/poll/`);
      expect(await waitFor(read, (m) => m.uid_validity === 2000 && m.last_uid === 3)).toMatchObject({
        messages_recorded: 3,
      });
      const [count] = await stack.sql<
        { n: number }[]
      >`select count(*)::int as n from inbox_messages where workspace_id = ${ws.workspaceId} and direction = 'inbound'`;
      expect(count!.n).toBe(3);

      expect((await call('DELETE', `/inbox/mailboxes/${mailbox.id}/`)).statusCode).toBe(204);
      const handle = stack.client.workflow.getHandle(`inbox-mailbox/${mailbox.id}`);
      expect(await handle.result()).toBe('gone');
    } finally {
      await imap.close();
    }
  });

  it('keeps a failed login or connection on the mailbox and tries again at the next poll', async () => {
    const ws = await stack.createWorkspace('paid');
    const created = (
      await stack.app.inject({
        method: 'POST',
        url: '/inbox/mailboxes/',
        headers: withKey(ws.apiKey),
        payload: {
          address: 'me@ours.example',
          host: '127.0.0.1',
          port: 1,
          secure: false,
          username: 'me',
          password: 'x',
          poll_seconds: 3600,
        },
      })
    ).json();
    const read = () =>
      stack.app
        .inject({ method: 'GET', url: `/inbox/mailboxes/${created.id}/`, headers: withKey(ws.apiKey) })
        .then((r) => r.json());
    const failed = await waitFor(read, (m) => m.last_error !== null);
    expect(failed).toMatchObject({ last_uid: 0, messages_recorded: 0 });
    const off = await stack.app.inject({
      method: 'PATCH',
      url: `/inbox/mailboxes/${created.id}/`,
      headers: withKey(ws.apiKey),
      payload: { enabled: false },
    });
    expect(off.json()).toMatchObject({ enabled: false, last_error: null });
    expect(await stack.client.workflow.getHandle(`inbox-mailbox/${created.id}`).result()).toBe('disabled');
    expect(
      (
        await stack.app.inject({
          method: 'POST',
          url: `/inbox/mailboxes/${created.id}/poll/`,
          headers: withKey(ws.apiKey),
        })
      ).statusCode,
    ).toBe(409);
  });
});

describe('a mailbox host', () => {
  it('is refused on a private network unless the operator allows it, with the reason kept on the mailbox', async () => {
    const ws = await stack.createWorkspace('paid');
    const keyring = await secretsKeyring(stack.sql, stack.integrations);
    for (const host of ['127.0.0.1', 'localhost', '10.1.2.3', '169.254.169.254']) {
      const [box] = await stack.sql<{ id: string }[]>`
        insert into inbox_mailboxes (workspace_id, address, host, port, secure, username, password_sealed, poll_seconds)
        values (${ws.workspaceId}, 'me@ours.example', ${host}, 1, false, 'me', ${seal(keyring, 'x', mailboxPasswordContext(ws.workspaceId))}, 3600) returning id`;
      const result = await pollMailbox(stack.sql, box!.id, undefined, { allowPrivateNetworks: false }, keyring);
      expect(result).toMatchObject({ state: 'failed', recorded: 0 });
      const [row] = await stack.sql<
        { last_error: string }[]
      >`select last_error from inbox_mailboxes where id = ${box!.id}`;
      expect(row!.last_error).toBe(
        `The mailbox host ${host} is in a private network; mailboxes must be reachable on the internet.`,
      );
      // Allowed, the same host is tried: nothing listens on port 1, so the error is the connection's.
      await pollMailbox(stack.sql, box!.id, undefined, { allowPrivateNetworks: true }, keyring);
      const [after] = await stack.sql<
        { last_error: string }[]
      >`select last_error from inbox_mailboxes where id = ${box!.id}`;
      expect(after!.last_error).not.toContain('private network');
    }
  });
});

describe('the mailbox-poll workflow, on a time-skipping server', () => {
  const taskQueue = 'mailbox-poll-test';
  /** Scripted answers per mailbox, and the workflow-clock time of each poll. */
  const scripts = new Map<string, MailboxPollResult['state'][]>();
  const polls = new Map<string, number[]>();
  const more = new Set<string>();
  const temporal = useTimeSkippingWorker(taskQueue, (env) => ({
    async pollMailbox({ mailboxId }: { mailboxId: string }): Promise<MailboxPollResult> {
      polls.set(mailboxId, [...(polls.get(mailboxId) ?? []), await env.currentTimeMs()]);
      const state = scripts.get(mailboxId)?.shift() ?? 'polled';
      const again = more.delete(mailboxId);
      return { state, recorded: 0, more: again, pollSeconds: 3600, uidValidity: 1, lastUid: 0 };
    },
  }));
  const start = (mailboxId: string, pollsPerRun?: number) =>
    temporal.env.client.workflow.start(mailboxPollWorkflow, {
      taskQueue,
      workflowId: mailboxPollWorkflowId(mailboxId),
      args: [{ mailboxId, workspaceId: crypto.randomUUID(), ...(pollsPerRun ? { pollsPerRun } : {}) }],
    });

  it('reads every poll_seconds, at once again when more is waiting, and ends when the mailbox is gone', async () => {
    const id = crypto.randomUUID();
    scripts.set(id, ['polled', 'polled', 'polled', 'gone']);
    more.add(id);
    const handle = await start(id);
    expect(await handle.result()).toBe('gone');
    const times = polls.get(id)!.map((t) => Math.round((t - polls.get(id)![0]!) / 1000));
    expect(times).toEqual([0, 0, 3600, 7200]);
  });

  it('reads at once when signalled, and continues as new after its polls per run without losing its place', async () => {
    const id = crypto.randomUUID();
    scripts.set(id, ['polled', 'polled', 'polled', 'disabled']);
    const handle = await start(id, 2);
    for (let i = 0; i < 600 && (await handle.query(mailboxPollStateQuery)).polls < 1; i++)
      await new Promise((r) => setTimeout(r, 50));
    await handle.signal(pollMailboxNowSignal);
    expect(await handle.result()).toBe('disabled');
    const secondsAfterFirst = polls.get(id)!.map((t) => (t - polls.get(id)![0]!) / 1000);
    // Poll 2 came from the signal, not the hour; poll 3 opened a new run (continue-as-new) and read
    // at once. "At once" is seconds on a loaded machine (a second apart once failed a rounding to 0).
    expect(secondsAfterFirst.slice(0, 3).every((s) => s < 60)).toBe(true);
    expect(secondsAfterFirst).toHaveLength(4);
    expect((await handle.describe()).runId).not.toBe(handle.firstExecutionRunId);
  });
});
