/**
 * The short version of `npm run chaos:sequences`, as a child process on this run's Postgres
 * (a database of its own) and Temporal server (a task queue of its own): 40 contacts through two
 * automatic emails a minute apart while the worker is SIGKILLed twice, the SMTP sink refuses some
 * messages and about a third of the contacts reply at random moments (before the first email,
 * during the wait, after the last); it must exit 0 (every invariant held).
 * Then the checks themselves are shown to catch what they guard against, on that run's rows.
 *
 * Its length is set by the activity timeouts: an activity a killed worker was running is retried
 * only once its start-to-close timeout passes (2 minutes for a transition, 3 for a send).
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createSql } from '../../db/sql.js';
import { checkSequenceRun } from '../../sim/chaos-sequences.js';
import { parseHeaders, startSmtpSink, type SinkMessage } from '../../sim/smtp-sink.js';
import { projectRoot } from '../../worker/tools.js';
import { createTestDatabase } from '../support/database.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

describe('the SMTP sink', () => {
  it('keeps each message with its Message-ID and envelope recipient, and answers 451 when told to refuse', async () => {
    let refuse = false;
    const sink = await startSmtpSink({ refuseRate: 1, random: () => (refuse ? 0 : 1) });
    cleanups.push(() => sink.close());
    const transport = nodemailer.createTransport(sink.url);
    const mail = { from: 'sender@outreach.example', to: 'Person@Contacts.example', subject: 'Step 1', text: 'Hello' };
    await transport.sendMail({ ...mail, messageId: '<one@outreach.example>' });
    await transport.sendMail({ ...mail, messageId: '<one@outreach.example>' });
    refuse = true;
    const refused = await transport
      .sendMail({ ...mail, messageId: '<two@outreach.example>' })
      .catch((error: { responseCode?: number }) => error);
    expect((refused as { responseCode?: number }).responseCode).toBe(451);

    expect(sink.messages.map((m) => [m.messageId, m.to, m.from, m.subject])).toEqual([
      ['<one@outreach.example>', ['person@contacts.example'], 'sender@outreach.example', 'Step 1'],
      ['<one@outreach.example>', ['person@contacts.example'], 'sender@outreach.example', 'Step 1'],
    ]);
    expect(sink.refused).toBe(1);
    expect([...sink.duplicateMessageIds()]).toEqual([['<one@outreach.example>', 2]]);
  });

  it('keeps nothing of a message whose sender went away before its end', async () => {
    const sink = await startSmtpSink();
    cleanups.push(() => sink.close());
    const socket = connect(sink.port, '127.0.0.1');
    const script = [
      'EHLO test\r\n',
      'MAIL FROM:<a@outreach.example>\r\n',
      'RCPT TO:<b@contacts.example>\r\n',
      'DATA\r\n',
      'Message-ID: <cut@outreach.example>\r\nSubject: cut\r\n\r\nhalf a mess',
    ];
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        if (!/^\d{3} /m.test(chunk.toString())) return;
        const next = script.shift();
        if (next) socket.write(next);
        if (script.length === 0) setTimeout(() => socket.destroy(), 100);
      });
      socket.on('close', () => resolve());
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(sink.messages).toEqual([]);
    expect(sink.abandoned).toBe(1);
  });

  it('reads folded headers', () => {
    const headers = parseHeaders(
      Buffer.from('Subject: a long\r\n subject\r\nMessage-ID:\r\n <x@y>\r\n\r\nMessage-ID: <body@y>\r\n'),
    );
    expect(headers.get('subject')).toBe('a long subject');
    expect(headers.get('message-id')).toBe('<x@y>');
  });
});

it('keeps every email at most once, sends nothing after a reply and finishes every contact through worker kills', async () => {
  const db = await createTestDatabase();
  cleanups.push(() => db.drop());
  const dataDir = mkdtempSync(join(tmpdir(), 'chaos-sequences-'));
  chmodSync(dataDir, 0o755);
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));

  const args = [
    ...[
      '--contacts',
      '40',
      '--emails',
      '2',
      '--wait-minutes',
      '1',
      '--senders',
      '2',
      '--reply-rate',
      '0.35',
      '--refuse-rate',
      '0.05',
    ],
    ...['--kill-every', '3', '--max-kills', '2', '--seconds', '320'],
    ...[
      '--data-dir',
      dataDir,
      '--database-url',
      db.url,
      '--temporal-address',
      inject('temporalAddress'),
      '--workflow-bundle',
      inject('workflowBundlePath'),
      '--seed',
      '42',
    ],
  ];
  const child = spawn(process.execPath, ['--import', 'tsx', 'sim/chaos-sequences.ts', ...args], {
    cwd: projectRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // Past this the run is stuck: interrupt it (it stops its children) and fail with what it printed.
  const stuck = setTimeout(() => child.kill('SIGINT'), 350_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(stuck);
  console.log(output);

  expect(code, output).toBe(0);
  expect(output).toContain('All checks passed.');
  expect(output.match(/^PASS {2}/gm), output).toHaveLength(3);
  // The faults really happened, replies were recorded, and every contact took part.
  expect(Number(/worker SIGKILLed (\d+) times/.exec(output)?.[1]), output).toBeGreaterThanOrEqual(2);
  expect(output).toMatch(/contacts {11}40 enrolled/);
  expect(Number(/(\d+) replies recorded;/.exec(output)?.[1]), output).toBeGreaterThan(0);

  // The checks are not vacuous: on this run's rows, a message taken twice and a claim made after
  // a reply are both caught.
  const sequenceId = /sequence ([0-9a-f-]{36}) launched/.exec(output)![1]!;
  const sql = createSql(db.url, { max: 1 });
  cleanups.push(() => sql.end({ timeout: 5 }));
  const sent = await sql<{ message_id: string; to_email: string }[]>`
    select message_id, to_email from sequence_sends where sequence_id = ${sequenceId} and status = 'sent' and not unconfirmed`;
  const sink: SinkMessage[] = sent.map((s) => ({
    messageId: s.message_id,
    to: [s.to_email],
    from: null,
    subject: null,
    receivedAt: Date.now(),
    bytes: 1,
  }));
  const clean = await checkSequenceRun(sql, sequenceId, sink, 2);
  expect(clean.checks.map((c) => c.ok)).toEqual([true, true, true]);
  const twice = await checkSequenceRun(sql, sequenceId, [...sink, sink[0]!], 2);
  expect(twice.checks[0]!.ok).toBe(false);
  expect(twice.checks[0]!.violations.join('\n')).toContain(`Message-ID ${sink[0]!.messageId} taken 2 times`);
  // A claim whose snapshot sees a recorded reply: what the guard must never let through. Its send
  // is one of a contact whose reply was recorded (any: it need not have stopped the contact).
  const [replied] = await sql<{ id: string }[]>`
    select s.id from sequence_sends s join sequence_contacts c on c.id = s.contact_id
    where s.sequence_id = ${sequenceId} and exists (select 1 from chaos_replies r where r.from_email = normalize_email(c.email))
    order by s.id limit 1`;
  expect(replied, 'no send of a contact whose reply was recorded').toBeDefined();
  await sql`insert into chaos_send_claims values (${replied!.id}, clock_timestamp(), pg_current_xact_id(), pg_current_snapshot())`;
  const late = await checkSequenceRun(sql, sequenceId, sink, 2);
  expect(late.checks[1]!.ok).toBe(false);
  expect(late.checks[1]!.violations.join('\n')).toContain('after its reply recorded at');
}, 380_000);
