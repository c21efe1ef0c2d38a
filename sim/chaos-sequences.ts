/**
 * `npm run chaos:sequences -- [--contacts 1000] [--emails 3] [--seconds 1200]`: sequences under
 * faults. Real Postgres and a Temporal dev server, the worker and the API as child processes, and
 * a receiving SMTP server (sim/smtp-sink.ts) in this process. Contacts of an automatic email
 * sequence progress while the worker is SIGKILLed and restarted every few seconds, the sink
 * refuses some messages (451: the sender must try again), and replies are posted to the signed
 * inbound-email webhook at random moments (before the first email, between two, after the last).
 *
 * At the end it checks, and exits 1 on any violation:
 *   - no email taken twice by the sink (same Message-ID, or same contact and step);
 *   - no email claimed after its contact's reply was recorded. Two audit triggers (this run's
 *     instrumentation, installed in its own database) record each send's claim (approved ->
 *     sending, with the claiming statement's snapshot) and each reply's transaction id; a claim
 *     whose snapshot already saw the reply is a send after a reply. An email that reaches the
 *     sink after the reply but was claimed before it committed was already on its way: counted,
 *     not a violation;
 *   - every contact in a correct final state: completed with every email step sent, or stopped
 *     as `replied` (only a contact that replied), and every send Postgres calls confirmed-sent
 *     really reached the sink.
 */
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { signInboundEmail } from '../domain/inbox/inbound-signature.js';
import { migrate } from '../db/migrate.js';
import { createSql, type Sql } from '../db/sql.js';
import { startEmbeddedPostgres } from '../worker/embedded-postgres.js';
import { freePort } from '../worker/ports.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { startTemporalDevServer, type TemporalDevServerHandle } from '../worker/temporal-dev-server.js';
import { projectRoot } from '../worker/tools.js';
import type { CheckResult } from './chaos-checks.js';
import { couldNotRun, reportAndExit, elapsedSay, freshDataDir, mapLimit, runCleanups } from './chaos-run.js';
import { UsageError, numberFlag, seededRandom } from './cli.js';
import { ServiceProcess, buildServiceScripts } from './service-process.js';
import { startSmtpSink, type SinkMessage, type SmtpSink } from './smtp-sink.js';

// ---------------------------------------------------------------------------------------------
// The outreach set-up, through the HTTP API as a client would (shared with bench/sequences.ts)

export type HttpApi = <T>(method: string, path: string, body?: unknown) => Promise<{ status: number; body: T }>;

/** A JSON client for the service's API with an API key; network errors are retried for reads only. */
export function httpApi(baseUrl: () => string, apiKey: string): HttpApi {
  return async <T>(method: string, path: string, body?: unknown) => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const response = await fetch(baseUrl() + path, {
          method,
          headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(300_000),
        });
        return { status: response.status, body: (await response.json().catch(() => null)) as T };
      } catch (error) {
        if (method !== 'GET' || attempt >= 20) throw error;
        await sleep(500);
      }
    }
  };
}

async function expectStatus<T>(call: Promise<{ status: number; body: T }>, status: number, what: string): Promise<T> {
  const res = await call;
  if (res.status !== status)
    throw new Error(`${what} answered ${res.status}: ${JSON.stringify(res.body).slice(0, 500)}`);
  return res.body;
}

/** email 1, (wait), email 2, (wait), ... email N, end: waits of `waitMinutes` outside business hours, none when 0. */
export function linearEmailGraph(emails: number, waitMinutes: number, firstNameColumn: string) {
  const steps: Record<string, unknown>[] = [];
  for (let k = 1; k <= emails; k += 1) {
    const next = k === emails ? 'done' : waitMinutes > 0 ? `wait_${k}` : `email_${k + 1}`;
    steps.push({
      id: `email_${k}`,
      type: 'email',
      subject_segments: [
        { kind: 'text', text: `Step ${k}: a question for ` },
        { kind: 'column', column_id: firstNameColumn, options: ['you'] },
      ],
      body_segments: [
        { kind: 'text', text: 'Hello ' },
        { kind: 'builtin', builtin: 'first_name', options: ['there'] },
        { kind: 'text', text: `,\n\nThis is message ${k} of ${emails}.\n\n` },
        { kind: 'builtin', builtin: 'sender_full_name', options: ['The team'] },
      ],
      next,
    });
    if (k < emails && waitMinutes > 0)
      steps.push({
        id: `wait_${k}`,
        type: 'wait',
        minutes: waitMinutes,
        business_hours: false,
        next: `email_${k + 1}`,
      });
  }
  steps.push({ id: 'done', type: 'end' });
  return { start: 'email_1', steps };
}

export interface OutreachSetup {
  tableId: string;
  sequenceId: string;
  /** Row id and email of each contact, in order. */
  rows: { rowId: string; email: string }[];
  senders: { profileId: string; fromEmail: string }[];
}

/**
 * An audience table with `contacts` rows, `senders` sender profiles with a mailbox each, and an
 * automatic email sequence over the table, launched (so enrolled contacts start at once).
 */
export async function setUpOutreach(
  api: HttpApi,
  o: {
    contacts: number;
    senders: number;
    emails: number;
    waitMinutes: number;
    emailOf: (i: number) => string;
    label: string;
  },
): Promise<OutreachSetup> {
  const table = await expectStatus(
    api<{ id: string }>('POST', '/tables/', { name: `${o.label} audience` }),
    201,
    'creating the audience table',
  );
  const column = async (name: string) =>
    (
      await expectStatus(
        api<{ id: string }>('POST', `/tables/${table.id}/columns/`, { kind: 'input', name }),
        201,
        `adding column ${name}`,
      )
    ).id;
  const emailColumn = await column('Email');
  const firstColumn = await column('First name');
  const companyColumn = await column('Company');
  const rows: OutreachSetup['rows'] = [];
  for (let start = 0; start < o.contacts; start += 1000) {
    const batch = Array.from({ length: Math.min(1000, o.contacts - start) }, (_, j) => start + j);
    const answer = await expectStatus(
      api<{ results: { id: string | null; status: string }[] }>('POST', `/tables/${table.id}/rows/bulk/`, {
        rows: batch.map((i) => ({
          cells: { [emailColumn]: o.emailOf(i), [firstColumn]: `Person${i}`, [companyColumn]: `Company ${i % 97}` },
        })),
      }),
      200,
      'adding rows',
    );
    answer.results.forEach((r, j) => {
      if (r.status !== 'created' || !r.id) throw new Error(`row ${start + j} was not created: ${JSON.stringify(r)}`);
      rows.push({ rowId: r.id, email: o.emailOf(start + j) });
    });
  }
  const senders: OutreachSetup['senders'] = [];
  for (let s = 0; s < o.senders; s += 1) {
    const profile = await expectStatus(
      api<{ id: string }>('POST', '/sender-profiles/', { name: `${o.label} sender ${s + 1}` }),
      201,
      'creating a sender profile',
    );
    senders.push({ profileId: profile.id, fromEmail: `sender${s + 1}@outreach.example` });
  }
  const sequence = await expectStatus(
    api<{ id: string; revision: number }>('POST', '/sequences/', {
      name: `${o.label} sequence`,
      audience_table_id: table.id,
      audience_mapping: {
        email_column_id: emailColumn,
        first_name_column_id: firstColumn,
        company_name_column_id: companyColumn,
      },
      email_mode: 'automatic',
      senders: senders.map((s, i) => ({
        sender_profile_id: s.profileId,
        from_email: s.fromEmail,
        from_name: `Sender ${i + 1}`,
      })),
      graph: linearEmailGraph(o.emails, o.waitMinutes, firstColumn),
    }),
    201,
    'creating the sequence',
  );
  await expectStatus(
    api('POST', `/sequences/${sequence.id}/launch/`, { expected_revision: sequence.revision }),
    200,
    'launching the sequence',
  );
  return { tableId: table.id, sequenceId: sequence.id, rows, senders };
}

export interface EnrolAnswer {
  row_id: string;
  status: 'enrolled' | 'already_enrolled' | 'refused';
  reason: string | null;
  contact: { id: string } | null;
}

/** Enrols rows through POST /sequences/{id}/contacts/ in batches, `concurrency` requests at a time. */
export async function enrolRows(
  api: HttpApi,
  sequenceId: string,
  rowIds: string[],
  o: { batch: number; concurrency: number; onBatch?: (answers: EnrolAnswer[]) => void },
): Promise<EnrolAnswer[]> {
  const batches: string[][] = [];
  for (let i = 0; i < rowIds.length; i += o.batch) batches.push(rowIds.slice(i, i + o.batch));
  const answers: EnrolAnswer[][] = [];
  await mapLimit(batches, o.concurrency, async (batch, i) => {
    // Enrolment is idempotent per row (a repeat answers already_enrolled), so a lost answer is asked again.
    for (let attempt = 1; ; attempt += 1) {
      try {
        const body = await expectStatus(
          api<{ results: EnrolAnswer[] }>('POST', `/sequences/${sequenceId}/contacts/`, { row_ids: batch }),
          200,
          'enrolling rows',
        );
        answers[i] = body.results;
        o.onBatch?.(body.results);
        return;
      } catch (error) {
        if (attempt >= 5) throw error;
        await sleep(1000 * attempt);
      }
    }
  });
  return answers.flat();
}

// ---------------------------------------------------------------------------------------------
// The fault run

const usage = `Usage: npm run chaos:sequences -- [options]

  --contacts N           contacts to enrol (default 1000)
  --emails N             email steps in the sequence (default 3)
  --wait-minutes M       a wait of M minutes between two emails (default 1; 0: none)
  --senders N            sender profiles, each with its mailbox (default 3)
  --reply-rate R         share of contacts that reply, at a random moment (default 0.3)
  --refuse-rate R        share of messages the SMTP sink refuses with 451 (default 0.05)
  --kill-every S         SIGKILL the worker about every S seconds (default 8; 0: never)
  --max-kills N          stop killing after N kills (default 20)
  --seconds S            give up waiting for the contacts after S seconds (default 1200)
  --data-dir DIR         where Postgres, Temporal's SQLite and the logs go (default $DATA_DIR/chaos-sequences; wiped first)
  --database-url URL     use this (migrated or empty) database instead of starting Postgres
  --temporal-address A   use this Temporal server (our search attributes registered) instead of starting one
  --workflow-bundle FILE a prebuilt workflow bundle instead of building one
  --seed N               repeatable randomness`;

interface Options {
  contacts: number;
  emails: number;
  waitMinutes: number;
  senders: number;
  replyRate: number;
  refuseRate: number;
  killEvery: number;
  maxKills: number;
  seconds: number;
  dataDir: string;
  databaseUrl: string | undefined;
  temporalAddress: string | undefined;
  workflowBundle: string | undefined;
  seed: number;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      contacts: { type: 'string' },
      emails: { type: 'string' },
      'wait-minutes': { type: 'string' },
      senders: { type: 'string' },
      'reply-rate': { type: 'string' },
      'refuse-rate': { type: 'string' },
      'kill-every': { type: 'string' },
      'max-kills': { type: 'string' },
      seconds: { type: 'string' },
      'data-dir': { type: 'string' },
      'database-url': { type: 'string' },
      'temporal-address': { type: 'string' },
      'workflow-bundle': { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  return {
    contacts: numberFlag(values, 'contacts', 1000, { min: 1, max: 100_000 }),
    emails: numberFlag(values, 'emails', 3, { min: 1, max: 20 }),
    waitMinutes: numberFlag(values, 'wait-minutes', 1, { min: 0, max: 59 }),
    senders: numberFlag(values, 'senders', 3, { min: 1, max: 20 }),
    replyRate: numberFlag(values, 'reply-rate', 0.3, { min: 0, max: 1 }),
    refuseRate: numberFlag(values, 'refuse-rate', 0.05, { min: 0, max: 0.5 }),
    killEvery: numberFlag(values, 'kill-every', 8, { min: 0 }),
    maxKills: numberFlag(values, 'max-kills', 20, { min: 0 }),
    seconds: numberFlag(values, 'seconds', 1200, { min: 10 }),
    dataDir: resolve(
      values['data-dir'] ?? join(resolve(projectRoot, process.env.DATA_DIR ?? '.data'), 'chaos-sequences'),
    ),
    databaseUrl: values['database-url'],
    temporalAddress: values['temporal-address'],
    workflowBundle: values['workflow-bundle'],
    seed: numberFlag(values, 'seed', Math.floor(Math.random() * 1e9)),
  };
}

const started = Date.now();
const say = elapsedSay(started);

/**
 * This run's instrumentation, in its own database: when each send was claimed for SMTP (with the
 * claiming statement's snapshot) and each reply's transaction, so "claimed after the reply" is
 * decided by what the claim could see, not by clocks.
 */
async function installAudit(sql: Sql) {
  // Several statements of fixed DDL from this file (no input reaches it), hence unsafe.
  await sql.unsafe(`
    create table if not exists chaos_send_claims (send_id uuid not null, claimed_at timestamptz not null, xid xid8 not null, snap pg_snapshot not null);
    create table if not exists chaos_replies (message_id uuid not null, from_email text, inserted_at timestamptz not null, xid xid8 not null);
    create or replace function chaos_record_claim() returns trigger language plpgsql as $$
    begin
      insert into chaos_send_claims values (new.id, clock_timestamp(), pg_current_xact_id(), pg_current_snapshot());
      return null;
    end $$;
    create or replace function chaos_record_reply() returns trigger language plpgsql as $$
    begin
      insert into chaos_replies values (new.id, normalize_email(new.from_email), clock_timestamp(), pg_current_xact_id());
      return null;
    end $$;
    drop trigger if exists chaos_send_claims on sequence_sends;
    create trigger chaos_send_claims after update of status on sequence_sends for each row
      when (old.status = 'approved' and new.status = 'sending') execute function chaos_record_claim();
    drop trigger if exists chaos_replies on inbox_messages;
    create trigger chaos_replies after insert on inbox_messages for each row
      when (new.direction = 'inbound' and new.kind = 'reply') execute function chaos_record_reply();
  `);
}

interface SendRow {
  id: string;
  contact_id: string;
  step_id: string;
  status: string;
  unconfirmed: boolean;
  message_id: string;
}

interface ContactRow {
  id: string;
  email: string;
  status: string;
  stop_reason: string | null;
  current_step_id: string | null;
  wait_reason: string | null;
  wait_until: Date | null;
  error: string | null;
}

/** The invariants, read from the sink and from Postgres once the contacts are done. */
export async function checkSequenceRun(
  sql: Sql,
  sequenceId: string,
  sink: readonly SinkMessage[],
  emailSteps: number,
): Promise<{ checks: CheckResult[]; counts: Record<string, number> }> {
  const sends = await sql<
    SendRow[]
  >`select id, contact_id, step_id, status, unconfirmed, message_id from sequence_sends where sequence_id = ${sequenceId}`;
  const contacts = await sql<ContactRow[]>`
    select id, email, status, stop_reason, current_step_id, wait_reason, wait_until, error from sequence_contacts where sequence_id = ${sequenceId}`;
  const byMessageId = new Map(sends.map((s) => [s.message_id, s]));
  const contactById = new Map(contacts.map((c) => [c.id, c]));
  const replies = await sql<
    { from_email: string; inserted_at: Date }[]
  >`select from_email, min(inserted_at) as inserted_at from chaos_replies group by from_email`;
  const replyAt = new Map(replies.map((r) => [r.from_email, r.inserted_at.getTime()]));

  // 1. Nothing taken twice at the sink.
  const duplicates: string[] = [];
  const seenIds = new Map<string, number>();
  const seenSteps = new Map<string, number>();
  const unknown: string[] = [];
  for (const m of sink) {
    const id = m.messageId ?? '(none)';
    seenIds.set(id, (seenIds.get(id) ?? 0) + 1);
    const send = m.messageId ? byMessageId.get(m.messageId) : undefined;
    if (!send) {
      unknown.push(`a message with Message-ID ${id} to ${m.to.join(', ')} that no send of this sequence carries`);
      continue;
    }
    const key = `${send.contact_id}/${send.step_id}`;
    seenSteps.set(key, (seenSteps.get(key) ?? 0) + 1);
  }
  for (const [id, n] of seenIds) if (n > 1) duplicates.push(`Message-ID ${id} taken ${n} times`);
  for (const [key, n] of seenSteps)
    if (n > 1) duplicates.push(`contact/step ${key} taken ${n} times (under different Message-IDs)`);
  const dupCheck: CheckResult = {
    name: 'no duplicate emails at the SMTP sink',
    ok: duplicates.length === 0 && unknown.length === 0,
    summary: `${sink.length} messages taken, ${seenIds.size} distinct Message-IDs, ${seenSteps.size} distinct contact/steps`,
    violations: [...duplicates, ...unknown],
    notes: [],
  };

  // 2. No send claimed once its contact's reply was recorded (the claim's snapshot saw the reply).
  const afterReply = await sql<
    { send_id: string; contact_id: string; step_id: string; claimed_at: Date; inserted_at: Date }[]
  >`
    select c.send_id, s.contact_id, s.step_id, c.claimed_at, r.inserted_at
    from chaos_send_claims c
    join sequence_sends s on s.id = c.send_id
    join sequence_contacts k on k.id = s.contact_id
    join chaos_replies r on r.from_email = normalize_email(k.email)
    where s.sequence_id = ${sequenceId} and pg_visible_in_snapshot(r.xid, c.snap)`;
  const claimsOf = await sql<{ send_id: string; claimed_at: Date }[]>`
    select c.send_id, c.claimed_at from chaos_send_claims c join sequence_sends s on s.id = c.send_id where s.sequence_id = ${sequenceId}`;
  const claimed = new Set(claimsOf.map((c) => c.send_id));
  let arrivedAfterReply = 0;
  const unclaimed: string[] = [];
  for (const m of sink) {
    const send = m.messageId ? byMessageId.get(m.messageId) : undefined;
    if (!send) continue;
    if (!claimed.has(send.id)) unclaimed.push(`${send.message_id} reached the sink with no guarded claim recorded`);
    const contact = contactById.get(send.contact_id);
    const at = contact ? replyAt.get(contact.email.toLowerCase()) : undefined;
    if (at !== undefined && m.receivedAt > at) arrivedAfterReply += 1;
  }
  const replyCheck: CheckResult = {
    name: 'no email sent after a recorded reply',
    ok: afterReply.length === 0 && unclaimed.length === 0,
    summary: `${replies.length} replies recorded; ${claimsOf.length} send claims, ${afterReply.length} of them after the contact's reply`,
    violations: [
      ...afterReply.map(
        (r) =>
          `contact ${r.contact_id} step ${r.step_id} claimed at ${r.claimed_at.toISOString()}, after its reply recorded at ${r.inserted_at.toISOString()}`,
      ),
      ...unclaimed,
    ],
    notes: arrivedAfterReply
      ? [
          `${arrivedAfterReply} email(s) reached the sink after their contact's reply was recorded, each claimed before the reply committed (already on its way)`,
        ]
      : [],
  };

  // 3. Every contact where it should be, and every confirmed send really delivered.
  const delivered = new Set(sink.flatMap((m) => (m.messageId ? [m.messageId] : [])));
  const sendsOf = new Map<string, SendRow[]>();
  for (const s of sends) sendsOf.set(s.contact_id, [...(sendsOf.get(s.contact_id) ?? []), s]);
  const wrong: string[] = [];
  const counts = {
    completed: 0,
    stoppedReplied: 0,
    completedAfterReply: 0,
    unconfirmed: 0,
    unconfirmedDelivered: 0,
    repliedContacts: replies.length,
  };
  for (const c of contacts) {
    const replied = replyAt.has(c.email.toLowerCase());
    const mine = sendsOf.get(c.id) ?? [];
    const sentSteps = new Set(mine.filter((s) => s.status === 'sent').map((s) => s.step_id));
    const where = `${c.status}${c.stop_reason ? ` (${c.stop_reason})` : ''} at ${c.current_step_id ?? 'start'}${c.wait_reason ? `, waiting on ${c.wait_reason}${c.wait_until ? ` until ${c.wait_until.toISOString()}` : ''}` : ''}${c.error ? `, error: ${c.error}` : ''}`;
    if (c.status === 'completed') {
      counts.completed += 1;
      if (replied) counts.completedAfterReply += 1;
      if (sentSteps.size !== emailSteps)
        wrong.push(`contact ${c.id} completed with ${sentSteps.size} of ${emailSteps} email steps sent`);
    } else if (c.status === 'stopped' && c.stop_reason === 'replied' && replied) {
      counts.stoppedReplied += 1;
    } else {
      wrong.push(`contact ${c.id} (${c.email}${replied ? ', replied' : ''}) ended ${where}`);
    }
    for (const s of mine) {
      if (s.status !== 'sent') continue;
      if (s.unconfirmed) {
        counts.unconfirmed += 1;
        if (delivered.has(s.message_id)) counts.unconfirmedDelivered += 1;
      } else if (!delivered.has(s.message_id))
        wrong.push(`send ${s.message_id} is recorded as sent but never reached the sink`);
    }
  }
  for (const m of sink) {
    const send = m.messageId ? byMessageId.get(m.messageId) : undefined;
    if (send && send.status !== 'sent')
      wrong.push(`${send.message_id} reached the sink but its send is ${send.status}`);
  }
  const stateCheck: CheckResult = {
    name: 'every contact in a correct final state',
    ok: wrong.length === 0,
    summary: `${contacts.length} contacts: ${counts.completed} completed (${counts.completedAfterReply} of them replied after their last email), ${counts.stoppedReplied} stopped as replied, ${contacts.length - counts.completed - counts.stoppedReplied} elsewhere`,
    violations: wrong,
    notes: counts.unconfirmed
      ? [
          `${counts.unconfirmed} send(s) claimed by a worker killed before SMTP answered: counted sent, never retried (${counts.unconfirmedDelivered} of them did reach the sink)`,
        ]
      : [],
  };
  return {
    checks: [dupCheck, replyCheck, stateCheck],
    counts: { ...counts, contacts: contacts.length, sends: sends.length, messages: sink.length },
  };
}

/** A reply from the contact, as raw MIME for the inbound-email webhook (no Date header: it is recorded as received now). */
function replyMime(from: string, to: string, inReplyTo: string | null, id: string): Buffer {
  const lines = [
    `From: ${from}`,
    `To: ${to}`,
    `Subject: Re: your message`,
    `Message-ID: <reply.${id}@contacts.example>`,
    ...(inReplyTo ? [`In-Reply-To: ${inReplyTo}`, `References: ${inReplyTo}`] : []),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Thanks, but please take me off your list for now.',
    '',
  ];
  return Buffer.from(lines.join('\r\n'));
}

async function main() {
  const o = readOptions();
  const random = seededRandom(o.seed);
  say(
    `chaos:sequences: ${o.contacts} contacts, ${o.emails} emails${o.waitMinutes ? ` ${o.waitMinutes} min apart` : ' back to back'}, ${o.senders} senders, seed ${o.seed}; data in ${o.dataDir}`,
  );
  await freshDataDir(o.dataDir);

  const { onCleanup, cleanup } = runCleanups(say);

  try {
    const startPostgres = async () => {
      if (o.databaseUrl) return o.databaseUrl;
      const pg = await startEmbeddedPostgres({ dataDir: join(o.dataDir, 'postgres'), fast: true });
      onCleanup(() => pg.stop());
      const admin = createSql(pg.url('postgres'), { max: 1 });
      await admin`create database chaos`;
      await admin.end();
      return pg.url('chaos');
    };
    let temporalAddress = o.temporalAddress ?? '';
    const startTemporal = async () => {
      if (o.temporalAddress) return;
      const temporal: TemporalDevServerHandle = await startTemporalDevServer({ dataDir: o.dataDir, ui: false });
      temporalAddress = temporal.address;
      onCleanup(() => temporal.stop());
    };
    const [databaseUrl, , built] = await Promise.all([
      startPostgres(),
      startTemporal(),
      buildServiceScripts(o.workflowBundle),
    ]);
    onCleanup(async () => built.remove());
    const { scripts } = built;
    const sql = createSql(databaseUrl, { max: 5 });
    onCleanup(() => sql.end({ timeout: 5 }));
    await migrate(sql);
    await installAudit(sql);

    // The receiving server, in this process: it outlives every worker the run kills.
    const contactOfEmail = new Map<string, number>();
    const received = new Map<number, string[]>();
    const replyPlan = new Map<number, { afterEmails: number; delayMs: number }>();
    let onDelivered: (index: number, count: number) => void = () => undefined;
    const sink: SmtpSink = await startSmtpSink({
      refuseRate: o.refuseRate,
      random: seededRandom(o.seed + 7),
      onMessage: (m) => {
        const index = contactOfEmail.get(m.to[0] ?? '');
        if (index === undefined || !m.messageId) return;
        const ids = received.get(index) ?? [];
        ids.push(m.messageId);
        received.set(index, ids);
        onDelivered(index, ids.length);
      },
    });
    onCleanup(() => sink.close());

    const apiPort = await freePort(18400);
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    const childEnv = (): NodeJS.ProcessEnv => ({
      ...process.env,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: 'default',
      // Its own queue: a shared Temporal server (--temporal-address) may serve other runs.
      TEMPORAL_TASK_QUEUE: `chaos-sequences-${o.seed}-${process.pid}`,
      HOST: '127.0.0.1',
      PORT: String(apiPort),
      RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'warn',
      WORKFLOW_BUNDLE: scripts.workflowBundle,
      SMTP_URL: sink.url,
      SMTP_FROM: 'outreach@chaos.example',
      EXIT_WITH_PARENT: '1',
    });
    const worker = new ServiceProcess(
      'worker',
      scripts.worker,
      childEnv,
      join(o.dataDir, 'worker.log'),
      'worker ready',
    );
    const apiProcess = new ServiceProcess('api', scripts.api, childEnv, join(o.dataDir, 'api.log'), 'api ready');
    onCleanup(() => worker.stop());
    onCleanup(() => apiProcess.stop());
    await Promise.all([worker.start(), apiProcess.start()]);
    say(
      `Postgres ready, Temporal at ${temporalAddress}, SMTP sink at ${sink.url}; worker (pid ${worker.pid}) and API (${apiUrl}) ready`,
    );

    const ws = await createWorkspaceWithAdmin(sql, { name: `Chaos sequences ${o.seed}`, plan: 'paid' });
    const api = httpApi(() => apiUrl, ws.api_key);
    const { secret } = await expectStatus(
      api<{ secret: string }>('POST', '/inbox/settings/webhook-secret/'),
      201,
      'making the webhook secret',
    );
    const emailOf = (i: number) => `person${i}.s${o.seed}@contacts.example`;
    for (let i = 0; i < o.contacts; i += 1) contactOfEmail.set(emailOf(i), i);
    const setup = await setUpOutreach(api, {
      contacts: o.contacts,
      senders: o.senders,
      emails: o.emails,
      waitMinutes: o.waitMinutes,
      emailOf,
      label: 'Chaos',
    });
    say(`${setup.rows.length} rows, ${setup.senders.length} senders, sequence ${setup.sequenceId} launched`);

    // Who replies, and when: before the first email (0), after the k-th, or after the last; then a random delay.
    for (let i = 0; i < o.contacts; i += 1) {
      if (random() < o.replyRate)
        replyPlan.set(i, { afterEmails: Math.floor(random() * (o.emails + 1)), delayMs: Math.floor(random() * 3000) });
    }
    const replies = { posted: 0, recorded: 0, failed: 0 };
    const replyTasks: Promise<void>[] = [];
    const postReply = (index: number) => {
      const task = (async () => {
        const last = received.get(index)?.at(-1) ?? null;
        const raw = replyMime(emailOf(index), setup.senders[0]!.fromEmail, last, `${o.seed}.${index}`);
        for (let attempt = 1; attempt <= 10; attempt += 1) {
          try {
            const timestamp = String(Math.floor(Date.now() / 1000));
            const res = await fetch(`${apiUrl}/inbox/inbound-email/`, {
              method: 'POST',
              headers: {
                'content-type': 'message/rfc822',
                'x-inbox-workspace': ws.workspace_id,
                'x-inbox-timestamp': timestamp,
                'x-inbox-signature': signInboundEmail(secret, timestamp, raw),
              },
              body: new Uint8Array(raw),
            });
            const body = (await res.json().catch(() => null)) as { kind?: string } | null;
            replies.posted += 1;
            if (res.status === 200 && body?.kind === 'reply') {
              replies.recorded += 1;
              return;
            }
            say(`a reply answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
          } catch {
            // the API is busy or restarting: the same Message-ID is recorded once however often it is posted
          }
          await sleep(500 * attempt);
        }
        replies.failed += 1;
      })();
      replyTasks.push(task);
    };
    onDelivered = (index, count) => {
      const plan = replyPlan.get(index);
      if (plan && plan.afterEmails === count) setTimeout(() => postReply(index), plan.delayMs);
    };

    // The faults, from enrolment on.
    const faults = { kills: 0, restartMs: [] as number[] };
    const stopFaults = new AbortController();
    const pause = (ms: number) =>
      sleep(ms, undefined, { signal: stopFaults.signal }).then(
        () => true,
        () => false,
      );
    const killer = (async () => {
      while (o.killEvery > 0 && faults.kills < o.maxKills && (await pause(o.killEvery * 1000 * (0.5 + random())))) {
        const at = Date.now();
        await worker.restart('SIGKILL');
        faults.kills += 1;
        faults.restartMs.push(Date.now() - at);
      }
    })().catch((error: unknown) => say(`the worker could not be restarted: ${(error as Error).message}`));

    const indexOfRow = new Map(setup.rows.map((r, i) => [r.rowId, i]));
    const enrolStarted = Date.now();
    const answers = await enrolRows(
      api,
      setup.sequenceId,
      setup.rows.map((r) => r.rowId),
      {
        batch: 250,
        concurrency: 2,
        onBatch: (batch) => {
          for (const a of batch) {
            const index = indexOfRow.get(a.row_id);
            const plan = index === undefined ? undefined : replyPlan.get(index);
            if (index !== undefined && a.status === 'enrolled' && plan?.afterEmails === 0)
              setTimeout(() => postReply(index), plan.delayMs);
          }
        },
      },
    );
    const enrolled = answers.filter((a) => a.status === 'enrolled').length;
    const refusedRows = answers.filter((a) => a.status !== 'enrolled');
    say(
      `${enrolled} contacts enrolled in ${((Date.now() - enrolStarted) / 1000).toFixed(1)} s${refusedRows.length ? `; ${refusedRows.length} not: ${[...new Set(refusedRows.map((a) => a.reason ?? a.status))].join(', ')}` : ''}`,
    );

    // Until every contact has finished (and a couple of kills happened), or the deadline.
    const deadline = started + o.seconds * 1000;
    let lastPrint = 0;
    let open = enrolled;
    for (;;) {
      const rows = await sql<{ status: string; n: number }[]>`
        select status, count(*)::int as n from sequence_contacts where sequence_id = ${setup.sequenceId} group by status`.catch(
        () => null,
      );
      if (rows) open = rows.filter((r) => !['completed', 'stopped'].includes(r.status)).reduce((a, r) => a + r.n, 0);
      const killsDone = o.killEvery === 0 || faults.kills >= Math.min(2, o.maxKills);
      if ((open === 0 && killsDone) || Date.now() > deadline) break;
      if (Date.now() - lastPrint > 5000) {
        lastPrint = Date.now();
        say(
          `contacts ${rows?.map((r) => `${r.status} ${r.n}`).join(', ') ?? '?'}; emails taken ${sink.messages.length} (refused ${sink.refused}); replies recorded ${replies.recorded}; worker kills ${faults.kills}`,
        );
      }
      await sleep(500);
    }
    stopFaults.abort();
    await killer;
    if (open > 0) say(`gave up waiting after ${o.seconds} s with ${open} contacts still open`);
    // Replies still scheduled for contacts that finished meanwhile are sent too: they must change nothing.
    await sleep(3500);
    await Promise.all(replyTasks);
    // Anything a worker still had in flight lands now.
    await sleep(2000);

    const { checks, counts } = await checkSequenceRun(sql, setup.sequenceId, sink.messages, o.emails);
    const elapsed = (Date.now() - started) / 1000;
    const restartAvg = faults.restartMs.length
      ? faults.restartMs.reduce((a, b) => a + b, 0) / faults.restartMs.length / 1000
      : 0;
    const lines = [
      '',
      `chaos:sequences finished in ${elapsed.toFixed(0)} s (seed ${o.seed})`,
      `faults             worker SIGKILLed ${faults.kills} times (back in ${restartAvg.toFixed(1)} s on average); exits nobody asked for: worker ${worker.unexpectedExits}, API ${apiProcess.unexpectedExits}; ` +
        `SMTP refusals (451) ${sink.refused}, messages abandoned mid-transfer ${sink.abandoned}`,
      `contacts           ${counts.contacts} enrolled, ${counts.completed} completed, ${counts.stoppedReplied} stopped as replied`,
      `emails             ${counts.messages} taken by the sink, ${counts.sends} sends recorded; ${counts.unconfirmed} unconfirmed`,
      `replies            ${replyPlan.size} planned, ${replies.recorded} recorded (${replies.posted} posts, ${replies.failed} given up)`,
    ];
    await reportAndExit(lines, checks, [join(o.dataDir, 'worker.log'), join(o.dataDir, 'api.log')], cleanup);
  } catch (error) {
    await couldNotRun('chaos:sequences', error, say, cleanup);
  }
}

// Run only as a script: bench/sequences.ts imports the set-up above.
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`${(error as Error).message}\n\n${usage}\n`);
      process.exit(2);
    }
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(2);
  });
}
