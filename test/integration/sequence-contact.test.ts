/**
 * A contact's progression on the workflow's clock (time-skipping server): waits in the sender's
 * business hours across days and a daylight-saving change, a reply that lands as the send is
 * about to run, pausing, version migration that never repeats a step, and continue-as-new.
 * Postgres and the activities are real; the mailer is a local one that records what it is given.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ContactAction } from '../../activities/sequences/sequences.js';
import { startOptions } from '../../services/pnet/browser-step-client.js';
import { migrateContact, setContactState } from '../../store/sequences/sequences.js';
import { type SequenceGraph } from '../../domain/sequences/sequences.js';
import { addDays, localDate, zonedInstant } from '../../domain/shared/zoned-time.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import { sequenceContactWorkflow } from '../../workflows/sequences/sequence-contact.js';
import {
  sequenceContactStateQuery,
  sequenceContactWorkflowId,
  wakeContactSignal,
  type SequenceContactInput,
} from '../../workflows/sequences/sequence-contact.contract.js';
import { sequencesApi, type SequencesApi } from '../support/sequences.js';
import { useTestStack } from '../support/test-stack.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';
import { OutboundEmail, Mailer } from '../../integrations/mailer.js';
import { testIntegrations } from '../support/integrations.js';

const sent: OutboundEmail[] = [];
const mailer: Mailer = {
  defaultFrom: 'outreach@mail.example',
  domain: 'mail.example',
  async send(mail) {
    sent.push(mail);
    return { accepted: [mail.to], response: '250 OK' };
  },
};
/** Runs before a send the workflow was told to make (the reply-race test records a reply there). */
let beforeSendDecision: ((contactId: string) => Promise<void>) | null = null;

const { stack, paid } = useTestStack();
const taskQueue = 'sequence-contact-test';
const temporal = useTimeSkippingWorker(taskQueue, (env) => {
  const acts = createActivities({
    sql: stack.sql,
    startStep: async (row) =>
      void (await env.client.workflow.start(browserStepWorkflow, {
        ...startOptions(taskQueue, row),
        typedSearchAttributes: [],
      })),
    housekeeping: {},
    integrations: testIntegrations({ mailer }),
  });
  return {
    ...acts,
    async advanceSequenceContact(input: { contactId: string; now: string }): Promise<ContactAction> {
      const action = await acts.advanceSequenceContact(input);
      if (action.kind === 'send_email' && beforeSendDecision) await beforeSendDecision(input.contactId);
      return action;
    },
  };
});
let api: SequencesApi;
beforeAll(() => {
  api = sequencesApi(stack, paid);
});

const zone = 'America/New_York';
const email = (id: string, next: string) => ({
  id,
  type: 'email',
  subject_segments: [{ kind: 'text', text: id }],
  body_segments: [{ kind: 'text', text: `Body of ${id}` }],
  next,
});
const wait = (id: string, days: number, next: string, extra: object = {}) => ({
  id,
  type: 'wait',
  days,
  next,
  ...extra,
});
const end = { id: 'done', type: 'end' };

/**
 * An active automatic sequence and one contact on it, written directly (the API would start the
 * contact on the stack's own Temporal server, not this time-skipping one).
 */
async function contactOn(graph: object) {
  const audience = await api.audience();
  const profile = (await api.post('/sender-profiles/', { name: `S ${randomUUID()}`, timezone: zone })).json();
  const seq = await api.sequence({
    audience_table_id: audience.tableId,
    audience_mapping: audience.mapping,
    email_mode: 'automatic',
    senders: [{ sender_profile_id: profile.id, from_email: 's@sender.example' }],
    graph,
  });
  await stack.sql`update sequences set status = 'active' where id = ${seq.id}`;
  const address = `${randomUUID().slice(0, 8)}@example.com`;
  const rowId = await audience.addRow({ email: address, first: 'Ada' });
  const [c] = await stack.sql<{ id: string }[]>`
    insert into sequence_contacts (workspace_id, sequence_id, row_id, contact_key, email, first_name, sender_profile_id, version, enrolled_at)
    values (${paid.workspaceId}, ${seq.id}, ${rowId}, ${`${seq.id}:${rowId}`}, ${address}, 'Ada', ${profile.id}, 1,
            ${new Date(await temporal.env.currentTimeMs())}) returning id`;
  const input: SequenceContactInput = { contactId: c!.id, sequenceId: seq.id, workspaceId: paid.workspaceId };
  const start = (extra: Partial<SequenceContactInput> = {}) =>
    temporal.env.client.workflow.start(sequenceContactWorkflow, {
      taskQueue,
      workflowId: sequenceContactWorkflowId(seq.id, c!.id),
      args: [{ ...input, ...extra }],
      memo: { wait: null },
    });
  const mails = () => sent.filter((m) => m.to === address).map((m) => m.subject);
  const row = async () => (await stack.sql`select * from sequence_contacts where id = ${c!.id}`)[0]!;
  return { seqId: seq.id, contactId: c!.id, address, start, mails, row };
}

/** A reply from the person, as the inbox records it, at the workflow clock's time (contacts are enrolled on that clock). */
async function recordReply(address: string) {
  const at = new Date((await temporal.env.currentTimeMs()) + 1000);
  const [thread] = await stack.sql<{ id: string }[]>`
    insert into inbox_threads (workspace_id, channel, contact_email) values (${paid.workspaceId}, 'email', ${address}) returning id`;
  await stack.sql`insert into inbox_messages (workspace_id, thread_id, direction, kind, from_email, occurred_at)
                  values (${paid.workspaceId}, ${thread!.id}, 'inbound', 'reply', ${address}, ${at})`;
}

/** Moves the workflow clock to `at` (it only moves forward). */
async function sleepUntil(at: Date) {
  const ms = at.getTime() - (await temporal.env.currentTimeMs());
  expect(ms).toBeGreaterThan(0);
  await temporal.env.sleep(ms);
}

/** Real time passes for activities; polls until `check` holds. */
const eventually = (check: () => Promise<boolean>, ms = 20_000) =>
  vi.waitFor(
    async () => {
      if (!(await check())) expect.fail('condition never held');
    },
    { timeout: ms, interval: 100 },
  );

describe('a contact on the workflow clock', () => {
  it("waits a calendar day in the sender's zone across the spring-forward change, then to the next business hour", async () => {
    const c = await contactOn({
      start: 'first',
      steps: [email('first', 'pause'), wait('pause', 1, 'second'), email('second', 'done'), end],
    });
    // Saturday 2027-03-13 10:00 in New York; the clocks go forward in the night.
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 13 }, 10, 0, zone));
    const handle = await c.start();
    await eventually(async () => c.mails().length === 1 && (await c.row()).wait_reason === 'timer');
    // One calendar day keeps the wall-clock time (Sunday 10:00 EDT, 23 hours later), and Sunday is
    // not a business day: Monday 09:00 EDT.
    const monday9 = zonedInstant({ year: 2027, month: 3, day: 15 }, 9, 0, zone);
    expect((await c.row()).wait_until).toEqual(monday9);
    expect(await handle.query(sequenceContactStateQuery)).toMatchObject({
      phase: 'waiting',
      wait: { reason: 'timer', until: monday9.toISOString() },
    });
    const memo = (await handle.describe()).memo as { wait: { reason: string; until: string } };
    expect(memo.wait).toEqual({ reason: 'timer', until: monday9.toISOString() });

    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 15 }, 8, 59, zone));
    expect(c.mails()).toEqual(['first']);
    await sleepUntil(zonedInstant({ year: 2027, month: 3, day: 15 }, 9, 1, zone));
    expect((await handle.result()).phase).toBe('completed');
    expect(c.mails()).toEqual(['first', 'second']);
    expect(await c.row()).toMatchObject({ status: 'completed', done_steps: ['first', 'second'], wait_reason: null });
  });

  it('waits across several days and a weekend in business hours (Friday 16:30 + 1 day 2 hours → Monday 09:00)', async () => {
    const c = await contactOn({
      start: 'pause',
      steps: [wait('pause', 1, 'first', { hours: 2 }), email('first', 'done'), end],
    });
    // The next Friday on the workflow clock (a finished workflow may have moved it far ahead).
    let friday = addDays(localDate(new Date(await temporal.env.currentTimeMs()), zone), 1);
    while (new Date(Date.UTC(friday.year, friday.month - 1, friday.day)).getUTCDay() !== 5) friday = addDays(friday, 1);
    await sleepUntil(zonedInstant(friday, 16, 30, zone));
    const handle = await c.start();
    // Saturday 18:30 is outside business hours: Monday 09:00.
    await eventually(async () => (await c.row()).wait_reason === 'timer');
    expect((await c.row()).wait_until).toEqual(zonedInstant(addDays(friday, 3), 9, 0, zone));
    expect((await handle.result()).phase).toBe('completed');
    expect(c.mails()).toEqual(['first']);
  });

  it('sends nothing when a reply is recorded while the send is about to run (reply wins)', async () => {
    const c = await contactOn({ start: 'first', steps: [email('first', 'done'), end] });
    beforeSendDecision = async (contactId) => {
      if (contactId === c.contactId) await recordReply(c.address);
    };
    try {
      const handle = await c.start();
      expect(await handle.result()).toMatchObject({ phase: 'stopped' });
    } finally {
      beforeSendDecision = null;
    }
    expect(c.mails()).toEqual([]);
    expect(await c.row()).toMatchObject({ status: 'stopped', stop_reason: 'replied', done_steps: [] });
    expect((await stack.sql`select status, reason from sequence_sends where contact_id = ${c.contactId}`)[0]).toEqual({
      status: 'stopped',
      reason: 'replied',
    });
  });

  it('settles a send its dead worker left claimed as sent (unconfirmed), never again, before a reply recorded since stops the contact', async () => {
    const c = await contactOn({ start: 'first', steps: [email('first', 'done'), end] });
    let crashed = false;
    beforeSendDecision = async (contactId) => {
      if (contactId !== c.contactId || crashed) return;
      crashed = true;
      // What a worker killed during the SMTP exchange leaves: the send claimed, its delivery
      // unknown. The person replies meanwhile, and what runs after the restart is the move.
      await stack.sql`update sequence_sends set status = 'sending' where contact_id = ${c.contactId} and status = 'approved'`;
      await recordReply(c.address);
      throw new Error('the worker died here');
    };
    try {
      const handle = await c.start();
      expect(await handle.result()).toMatchObject({ phase: 'stopped' });
    } finally {
      beforeSendDecision = null;
    }
    expect(crashed).toBe(true);
    expect(c.mails()).toEqual([]);
    expect(await c.row()).toMatchObject({ status: 'stopped', stop_reason: 'replied' });
    expect(
      (await stack.sql`select status, unconfirmed from sequence_sends where contact_id = ${c.contactId}`)[0],
    ).toEqual({ status: 'sent', unconfirmed: true });
  });

  it('stops a contact waiting days for its next step as soon as it is woken after a reply, without waiting the days out', async () => {
    const c = await contactOn({
      start: 'first',
      steps: [
        email('first', 'pause'),
        wait('pause', 3, 'second', { business_hours: false }),
        email('second', 'done'),
        end,
      ],
    });
    const handle = await c.start();
    await eventually(async () => (await c.row()).wait_reason === 'timer');
    const before = await temporal.env.currentTimeMs();
    await recordReply(c.address);
    await handle.signal(wakeContactSignal);
    // Read before awaiting the result: a client waiting on a result lets the test server skip ahead.
    await eventually(async () => (await c.row()).status === 'stopped');
    expect((await temporal.env.currentTimeMs()) - before).toBeLessThan(3 * 86_400_000);
    expect(await handle.result()).toMatchObject({ phase: 'stopped' });
    expect(c.mails()).toEqual(['first']);
    expect((await c.row()).stop_reason).toBe('replied');
  });

  it('holds a paused contact past the end of its wait, and goes on once resumed', async () => {
    const c = await contactOn({
      start: 'pause',
      steps: [wait('pause', 1, 'first', { business_hours: false }), email('first', 'done'), end],
    });
    const handle = await c.start();
    await eventually(async () => (await c.row()).wait_reason === 'timer');
    await setContactState(stack.sql, paid.workspaceId, c.seqId, c.contactId, 'pause');
    await temporal.env.sleep('2 days');
    await eventually(async () => (await c.row()).wait_reason === 'paused');
    expect(c.mails()).toEqual([]);
    expect(await handle.query(sequenceContactStateQuery)).toMatchObject({ wait: { reason: 'paused', until: null } });
    await setContactState(stack.sql, paid.workspaceId, c.seqId, c.contactId, 'resume');
    await handle.signal(wakeContactSignal);
    expect((await handle.result()).phase).toBe('completed');
    expect(c.mails()).toEqual(['first']);
  });

  it('migrates a contact to a new version without repeating a step it already had', async () => {
    const v1 = {
      start: 'intro',
      steps: [
        email('intro', 'pause'),
        wait('pause', 2, 'follow_up', { business_hours: false }),
        email('follow_up', 'done'),
        end,
      ],
    };
    const c = await contactOn(v1);
    const handle = await c.start();
    await eventually(async () => (await c.row()).wait_reason === 'timer');
    expect(c.mails()).toEqual(['intro']);

    // A live edit: a new version that opens with the same intro and adds a case study after it.
    const current = (await api.get(`/sequences/${c.seqId}/`)).json();
    const v2: SequenceGraph = {
      start: 'intro',
      steps: [
        email('intro', 'case_study'),
        email('case_study', 'pause'),
        wait('pause', 2, 'follow_up', { business_hours: false }),
        email('follow_up', 'done'),
        end,
      ] as never,
    };
    const edited = await api.patch(`/sequences/${c.seqId}/`, { expected_revision: current.revision, graph: v2 });
    expect(edited.json().version).toBe(2);
    expect((await c.row()).version).toBe(1);
    // Moved back to the start of version 2: the intro it already had is passed over, never sent again.
    const moved = await migrateContact(stack.sql, paid.workspaceId, c.seqId, c.contactId, 2, 'intro');
    expect(moved).toMatchObject({ migrated: true });
    await handle.signal(wakeContactSignal);
    expect((await handle.result()).phase).toBe('completed');
    expect(c.mails()).toEqual(['intro', 'case_study', 'follow_up']);
    expect(await c.row()).toMatchObject({ version: 2, done_steps: ['intro', 'case_study', 'follow_up'] });
  });

  it('branches on whether the contact opened an earlier email', async () => {
    const graph = {
      start: 'intro',
      steps: [
        email('intro', 'pause'),
        wait('pause', 2, 'seen', { business_hours: false }),
        { id: 'seen', type: 'branch', condition: 'opened', if_true: 'warm', if_false: 'cold' },
        email('warm', 'done'),
        email('cold', 'done'),
        end,
      ],
    };
    const opened = await contactOn(graph);
    const unopened = await contactOn(graph);
    const handles = [await opened.start(), await unopened.start()];
    await eventually(
      async () => (await opened.row()).wait_reason === 'timer' && (await unopened.row()).wait_reason === 'timer',
    );
    const token = (
      await stack.sql<
        { open_token: string }[]
      >`select open_token from sequence_sends where contact_id = ${opened.contactId}`
    )[0]!.open_token;
    expect((await stack.app.inject({ method: 'GET', url: `/sequences/opens/${token}/` })).statusCode).toBe(200);
    for (const h of handles) expect((await h.result()).phase).toBe('completed');
    expect(opened.mails()).toEqual(['intro', 'warm']);
    expect(unopened.mails()).toEqual(['intro', 'cold']);
  });

  it('continues as new on a long sequence and still finishes every step once', async () => {
    const steps = [];
    for (let i = 1; i <= 6; i++)
      steps.push(email(`m${i}`, `w${i}`), wait(`w${i}`, 1, i === 6 ? 'done' : `m${i + 1}`, { business_hours: false }));
    const c = await contactOn({ start: 'm1', steps: [...steps, end] });
    const handle = await c.start({ turnsPerRun: 4 });
    const result = await handle.result();
    expect(result.phase).toBe('completed');
    expect(result.continued).toBeGreaterThan(2);
    expect(c.mails()).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
  });
});
